//! The answer table as a subscriber to the zone store's change feed when
//! no kernel table is kept (XDP off, or its subscriber gone): each burst
//! of commits is compiled on a blocking thread, with the same plan the
//! kernel table's subscriber follows, and applied in place. Where the
//! table's [`Compiling`](super::on_demand::Compiling) says
//! so (large zones), no entry is held: the hot path compiles a name's
//! entries when asked, and a change needs nothing here.

use std::sync::Arc;

use tracing::{debug, error};

use super::compile::compile_diffs;
use super::plan::{fill, plan, Update};
use super::table::AnswerTable;
use crate::zone::{Snapshot, Subscription, ZoneStore};

/// Fills `table` from `store` and keeps it current until the store is
/// dropped.
pub fn start(table: Arc<AnswerTable>, store: &ZoneStore) -> tokio::task::JoinHandle<()> {
    let (snapshot, feed) = store.subscribe();
    tokio::spawn(follow(table, snapshot, feed))
}

/// Fills `table` from `first` and keeps it current with `feed`.
pub async fn follow(table: Arc<AnswerTable>, first: Arc<Snapshot>, mut feed: Subscription) {
    let t = table.clone();
    let first_fill = move || {
        if !switch_if_asked(&t, &first) {
            fill(&t, &first);
            crate::memory::release_freed();
        }
    };
    if tokio::task::spawn_blocking(first_fill).await.is_err() {
        error!("answer table: compile panicked; the full handler answers everything");
        return;
    }
    while let Some(item) = feed.next().await {
        let mut burst = vec![item];
        while let Some(more) = feed.try_next() {
            burst.push(more);
        }
        let snapshot = burst.last().expect("one item").snapshot().clone();
        let update = plan(&burst);
        drop(burst);
        let t = table.clone();
        let done = tokio::task::spawn_blocking(move || {
            if switch_if_asked(&t, &snapshot) {
                return;
            }
            match update {
                Update::Rebuild => {
                    fill(&t, &snapshot);
                    crate::memory::release_freed();
                }
                Update::Delta(diffs) => {
                    let delta = compile_diffs(&snapshot, &diffs, &*t);
                    t.unsettle();
                    t.apply(&delta);
                    t.settle(snapshot.version());
                }
            }
            debug!(
                version = snapshot.version(),
                entries = t.len(),
                "answer table updated"
            );
        })
        .await;
        if done.is_err() {
            // Left unsettled: the full handler answers everything.
            error!("answer table: compile panicked; the full handler answers everything");
            return;
        }
    }
}

/// Switches `table` to entries compiled on demand, or back to a whole
/// table filled from `snapshot`, if its compiling setting now asks for the
/// other; true when the table needs no more for `snapshot`.
fn switch_if_asked(table: &AnswerTable, snapshot: &Snapshot) -> bool {
    let now = table.on_demand();
    let wanted = table.compiling().on_demand(snapshot, now);
    match (now, wanted) {
        (_, true) => {
            table.set_on_demand(true);
            if !now {
                crate::memory::release_freed();
                debug!("answer table: entries compiled on demand");
            }
            true
        }
        (true, false) => {
            fill(table, snapshot);
            table.set_on_demand(false);
            crate::memory::release_freed();
            debug!(entries = table.len(), "answer table: compiled whole");
            true
        }
        (false, false) => false,
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::path::Path;

    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::{Name, RecordType};

    use super::*;
    use crate::answers::hot::answer;
    use crate::answers::on_demand::Compiling;
    use crate::handler::{Handler, Transport};
    use crate::zone::{load_zone_str, Zone};

    const NOW: u64 = 1_700_000_000;

    fn zone(text: &str) -> Zone {
        let origin = Name::from_ascii("example.com.").unwrap();
        load_zone_str(text, &origin, Path::new("t.zone")).unwrap()
    }

    /// A zone's apex and name server, without its other names.
    const HEAD: &str = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 7 3600 600 86400 60\n\
                        @ NS ns1\nns1 A 192.0.2.53\n";

    fn query(name: &str) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.id = 0xabcd;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
        m.to_vec().unwrap()
    }

    #[tokio::test]
    async fn the_subscriber_follows_the_store() {
        let store = ZoneStore::with_zones(vec![zone(&format!("{HEAD}www A 192.0.2.1\n"))]);
        let table = Arc::new(AnswerTable::default());
        let _task = start(table.clone(), &store);
        let wait_for = |version: u64| {
            let table = table.clone();
            async move {
                for _ in 0..500 {
                    if table.version() == Some(version) {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                panic!("hot table never reached version {version}");
            }
        };
        wait_for(store.snapshot().version()).await;
        let text = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 8 3600 600 86400 60\n@ NS ns1\n\
                    ns1 A 192.0.2.53\nnew A 192.0.2.201\n";
        store.replace_zones(vec![zone(text)], &[], NOW);
        wait_for(store.snapshot().version()).await;
        let h = Handler::default();
        let peer: IpAddr = "192.0.2.99".parse().unwrap();
        // The new name answered from the table, the removed one NXDOMAIN,
        // each with the full handler's bytes.
        for (name, rcode) in [("new.example.com.", 0), ("www.example.com.", 3)] {
            let q = query(name);
            let snapshot = store.snapshot();
            let full = h.handle(&snapshot, &q, Transport::Udp, peer, NOW);
            let hot = answer(&table, &snapshot, &q, Transport::Udp, peer, NOW, &h.edns);
            let hot = hot.map(|a| a.bytes);
            assert_eq!(hot, full, "{name}");
            assert_eq!(hot.map(|r| r[3] & 0x0f), Some(rcode), "{name}");
        }
    }

    #[tokio::test]
    async fn a_table_compiling_on_demand_holds_nothing_and_answers_alike() {
        let store = ZoneStore::with_zones(vec![zone(&format!("{HEAD}www A 192.0.2.1\n"))]);
        let table = Arc::new(AnswerTable::default());
        table.set_compiling(Compiling::OnDemand);
        let _task = start(table.clone(), &store);
        let h = Handler::default();
        let peer: IpAddr = "192.0.2.99".parse().unwrap();
        let hot = |name: &str| {
            let snapshot = store.snapshot();
            let q = query(name);
            let full = h.handle(&snapshot, &q, Transport::Udp, peer, NOW);
            // (A served name's first query is the full handler's.)
            let _ = answer(&table, &snapshot, &q, Transport::Udp, peer, NOW, &h.edns);
            let hot = answer(&table, &snapshot, &q, Transport::Udp, peer, NOW, &h.edns);
            let hot = hot.map(|a| a.bytes);
            assert_eq!(hot.as_ref(), full.as_ref(), "{name}");
            hot
        };
        for _ in 0..500 {
            if table.on_demand() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(table.on_demand());
        assert_eq!(table.len(), 0, "no entry held");
        assert!(hot("www.example.com.").is_some(), "answered hot");
        assert!(hot("nope.example.com.").is_some(), "NXDOMAIN hot");
        // A change is answered at once: nothing to follow.
        let text = format!("{HEAD}www A 192.0.2.2\n");
        store.replace_zones(vec![zone(&text)], &[], NOW);
        let reply = hot("www.example.com.").expect("answered hot");
        assert!(reply.ends_with(&[192, 0, 2, 2]), "{reply:?}");
        // Asked to compile whole again, the next change fills the table.
        table.set_compiling(Compiling::Whole);
        store.replace_zones(vec![zone(&format!("{HEAD}www A 192.0.2.3\n"))], &[], NOW);
        for _ in 0..500 {
            if !table.on_demand() && table.version() == Some(store.snapshot().version()) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!table.on_demand());
        assert!(!table.is_empty());
        assert!(hot("www.example.com.").is_some_and(|r| r.ends_with(&[192, 0, 2, 3])));
    }
}
