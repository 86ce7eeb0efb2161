//! The request-handler boundary: query bytes in, reply bytes out, answered
//! from one zone-store snapshot. Pure: the tokio servers and (later) the
//! XDP compiler's differential tests both call this.

mod chaos;
mod denial;
mod lookup;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, RecordType};

pub use chaos::Identity;
pub use lookup::resolve;

use std::net::IpAddr;

use xdpdns_common::cookie::{self, ClientIp};

use crate::wire::{self, ClientCookie, ClientEdns, Rejected, Reply, Request, ServerEdns};
use crate::zone::{Snapshot, Zone};
use std::sync::Arc;

/// How the query arrived; decides the size limit of the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// Everything but the zone data that shapes an answer.
#[derive(Clone, Debug, Default)]
pub struct Handler {
    pub edns: ServerEdns,
    pub identity: Identity,
}

impl Handler {
    /// Answers one DNS message from `peer` at `now` (unix seconds).
    /// `None` means send nothing (garbage or a response packet).
    pub fn handle(
        &self,
        snapshot: &Snapshot,
        packet: &[u8],
        transport: Transport,
        peer: IpAddr,
        now: u64,
    ) -> Option<Vec<u8>> {
        let mut req = match wire::parse_request(packet) {
            Ok(req) => req,
            Err(Rejected::Drop) => return None,
            Err(Rejected::Reply(bytes)) => return Some(bytes),
        };
        self.stamp(&mut req, peer, now);
        Some(self.reply(snapshot, &req, transport))
    }

    /// Decides the COOKIE option of the reply to `req` from `peer` at
    /// `now`: the client cookie with a server cookie echoed or minted by
    /// the construction the XDP program shares (RFC 9018). Returns
    /// whether the query carried a valid server cookie.
    pub fn stamp(&self, req: &mut Request, peer: IpAddr, now: u64) -> bool {
        let Some(ClientEdns {
            cookie: ClientCookie::Present { client, server },
            ..
        }) = req.edns
        else {
            return false;
        };
        let ip = match peer {
            IpAddr::V4(a) => ClientIp::V4(a.octets()),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => ClientIp::V4(v4.octets()),
                None => ClientIp::V6(a.octets()),
            },
        };
        let secrets = &self.edns.cookies;
        let (server_cookie, valid) = cookie::reply(
            &secrets.key_words(),
            secrets.previous.is_some(),
            client,
            server.as_ref(),
            now as u32,
            &ip,
        );
        let mut option = [0u8; 24];
        option[..8].copy_from_slice(&client);
        option[8..].copy_from_slice(&server_cookie);
        req.reply_cookie = Some(option);
        valid
    }

    /// Answers a parsed request and encodes the reply.
    pub fn reply(&self, snapshot: &Snapshot, req: &Request, transport: Transport) -> Vec<u8> {
        self.reply_from(snapshot, req, transport).0
    }

    /// [`Handler::reply`], with the zone that answered (for the per-zone
    /// counters, so the router need not look it up again).
    pub fn reply_from<'s>(
        &self,
        snapshot: &'s Snapshot,
        req: &Request,
        transport: Transport,
    ) -> (Vec<u8>, Option<&'s Arc<Zone>>) {
        // No more records are gathered than could fit at their least
        // size: an RRset of thousands is never copied only to be dropped.
        let limit = self.limit(req, transport);
        let (reply, zone) = self.decide(snapshot, req, wire::max_records(limit));
        (wire::encode_reply(req, &reply, limit, &self.edns), zone)
    }

    fn limit(&self, req: &Request, transport: Transport) -> usize {
        match transport {
            Transport::Udp => wire::udp_reply_limit(req, &self.edns),
            Transport::Tcp => u16::MAX as usize,
        }
    }

    /// Encodes `reply` within the size limit of `transport`.
    pub fn encode(&self, req: &Request, reply: &Reply, transport: Transport) -> Vec<u8> {
        wire::encode_reply(req, reply, self.limit(req, transport), &self.edns)
    }

    /// The decision, before encoding, whatever its size.
    pub fn answer(&self, snapshot: &Snapshot, req: &Request) -> Reply {
        self.answer_within(snapshot, req, usize::MAX)
    }

    /// The decision, gathering at most `max_records` records (a reply
    /// with more is marked oversized and left unfilled).
    pub fn answer_within(&self, snapshot: &Snapshot, req: &Request, max_records: usize) -> Reply {
        self.decide(snapshot, req, max_records).0
    }

    /// The decision and the zone it came from, if any.
    fn decide<'s>(
        &self,
        snapshot: &'s Snapshot,
        req: &Request,
        max_records: usize,
    ) -> (Reply, Option<&'s Arc<Zone>>) {
        if req.edns.is_some_and(|e| e.version > 0) {
            return (Reply::error(ResponseCode::BADVERS), None);
        }
        if req
            .edns
            .is_some_and(|e| e.cookie == ClientCookie::Malformed)
        {
            return (Reply::error(ResponseCode::FormErr), None);
        }
        let q = &req.query;
        let error = |rcode| (Reply::error(rcode), None);
        match q.query_type() {
            // Meta-types that are not questions (RFC 6895 §3.1).
            RecordType::OPT | RecordType::TSIG => return error(ResponseCode::FormErr),
            // Transfers are the transfer layer's (`router::Router::respond`);
            // a bare handler refuses them.
            RecordType::AXFR | RecordType::IXFR => return error(ResponseCode::Refused),
            _ => {}
        }
        match q.query_class() {
            DNSClass::IN => {}
            DNSClass::CH => return (self.identity.answer(q), None),
            _ => return error(ResponseCode::Refused),
        }
        match zone_for(snapshot, q.name(), q.query_type()) {
            Some(zone) if zone.is_expired() => (Reply::error(ResponseCode::ServFail), Some(zone)),
            Some(zone) => {
                let dnssec = req.edns.is_some_and(|e| e.dnssec_ok);
                let reply = resolve(zone, q.name(), q.query_type(), max_records, dnssec, req.id);
                (reply, Some(zone))
            }
            None => error(ResponseCode::Refused),
        }
    }
}

/// The zone that answers `qtype` at `name`: the most specific served zone,
/// except that DS at a zone's apex is the parent's to answer (RFC 4035
/// §3.1.4.1) when the parent is served here too.
fn zone_for<'s>(
    snapshot: &'s Snapshot,
    name: &hickory_proto::rr::Name,
    qtype: RecordType,
) -> Option<&'s std::sync::Arc<crate::zone::Zone>> {
    let zone = snapshot.zone_of(name)?;
    if qtype == RecordType::DS
        && !name.is_root()
        && zone.origin_key() == &hickory_proto::rr::LowerName::new(name)
    {
        if let Some(parent) = snapshot.zone_of(&name.base_name()) {
            return Some(parent);
        }
    }
    Some(zone)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::str::FromStr;

    use hickory_proto::op::{Query, ResponseCode};
    use hickory_proto::rr::{Name, RecordType};

    use super::*;
    use crate::zone::{load_zone_str, ZoneStore};

    const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
        @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
        loop1 CNAME loop2\nloop2 CNAME loop1\n\
        into CNAME host.sub\nsub NS ns.sub\nns.sub A 192.0.2.53\n\
        *.w CNAME ns1\n";

    fn setup() -> (ZoneStore, Handler) {
        let origin = Name::from_str("example.com.").unwrap();
        let zone = load_zone_str(ZONE, &origin, Path::new("t.zone")).unwrap();
        (ZoneStore::with_zones(vec![zone]), Handler::default())
    }

    fn ask(name: &str, t: RecordType) -> Reply {
        let (store, h) = setup();
        let req = Request::new(1, Query::query(Name::from_ascii(name).unwrap(), t));
        h.answer(&store.snapshot(), &req)
    }

    #[test]
    fn records_are_gathered_only_up_to_what_the_size_can_hold() {
        let origin = Name::from_str("example.com.").unwrap();
        let mut text = String::from(ZONE);
        for i in 0..3000u32 {
            text += &format!("many A 10.{}.{}.1\n", i >> 8, i & 255);
            let t = i % 500;
            text += &format!(
                "srv SRV {} 0 80 t{t}\nt{t} A 10.9.{}.{}\n",
                i / 500,
                t >> 8,
                t & 255
            );
        }
        let zone = load_zone_str(&text, &origin, Path::new("t.zone")).unwrap();
        let store = ZoneStore::with_zones(vec![zone]);
        let h = Handler::default();
        let ask = |name: &str, t, max| {
            let req = Request::new(1, Query::query(Name::from_ascii(name).unwrap(), t));
            h.answer_within(&store.snapshot(), &req, max)
        };
        let r = ask("many.example.com.", RecordType::A, 100);
        assert!(r.oversized);
        assert!(r.answers.is_empty() && r.additional.is_empty());
        let r = ask("many.example.com.", RecordType::A, 3000);
        assert!(!r.oversized);
        assert_eq!(r.answers.len(), 3000);
        // SRV: 3,000 records to 500 targets, each target's A once.
        let r = ask("srv.example.com.", RecordType::SRV, usize::MAX);
        assert_eq!((r.answers.len(), r.additional.len()), (3000, 500));
        let r = ask("srv.example.com.", RecordType::SRV, 3499);
        assert!(r.oversized, "the additional section counts too");
        // Over UDP the oversized reply is the question with TC.
        let req = Request::new(
            1,
            Query::query(
                Name::from_ascii("many.example.com.").unwrap(),
                RecordType::A,
            ),
        );
        let bytes = h.reply(&store.snapshot(), &req, Transport::Udp);
        assert_eq!(bytes.len(), 12 + 17 + 5);
        assert!(bytes[2] & 0x02 != 0, "TC");
    }

    #[test]
    fn cname_loops_end() {
        let r = ask("loop1.example.com.", RecordType::A);
        assert_eq!(r.rcode, ResponseCode::NoError);
        assert_eq!(r.answers.len(), 16, "bounded by MAX_CNAME_CHAIN");
    }

    #[test]
    fn cname_into_a_delegation_ends_in_a_referral() {
        let r = ask("into.example.com.", RecordType::A);
        assert_eq!(r.answers.len(), 1);
        assert!(r.authoritative, "the CNAME itself is ours");
        assert_eq!(r.authority[0].record_type(), RecordType::NS);
        assert_eq!(r.additional.len(), 1);
    }

    #[test]
    fn wildcard_cname_is_synthesised_and_chased() {
        let r = ask("X.w.example.com.", RecordType::A);
        assert_eq!(r.answers.len(), 2);
        assert_eq!(
            r.answers[0].name.to_ascii(),
            "X.w.example.com.",
            "client case kept"
        );
        assert_eq!(r.answers[1].name.to_string(), "ns1.example.com.");
    }

    #[test]
    fn a_wildcard_owner_queried_literally_is_an_exact_match() {
        let r = ask("*.W.example.com.", RecordType::CNAME);
        assert_eq!(r.answers.len(), 1, "{r:?}");
        assert_eq!(r.answers[0].name.to_ascii(), "*.W.example.com.");
    }

    #[test]
    fn a_target_named_twice_in_a_small_rrset_is_listed_once() {
        let origin = Name::from_str("example.com.").unwrap();
        let text = format!(
            "{ZONE}twice MX 10 mx9\ntwice MX 20 mx9\ntwice MX 30 mx8\nmx9 A 10.0.9.9\nmx8 A 10.0.8.8\n"
        );
        let zone = load_zone_str(&text, &origin, Path::new("t.zone")).unwrap();
        let store = ZoneStore::with_zones(vec![zone]);
        let name = Name::from_ascii("twice.example.com.").unwrap();
        let req = Request::new(1, Query::query(name, RecordType::MX));
        let bytes = Handler::default().reply(&store.snapshot(), &req, Transport::Udp);
        let m = hickory_proto::op::Message::from_vec(&bytes).unwrap();
        let listed: Vec<String> = m.additionals.iter().map(|r| r.name.to_string()).collect();
        assert_eq!(m.answers.len(), 3);
        assert_eq!(listed, ["mx9.example.com.", "mx8.example.com."]);
    }

    #[test]
    fn optional_additional_records_go_before_truncation_but_glue_does_not() {
        let origin = Name::from_str("example.com.").unwrap();
        let mut text = String::from(ZONE);
        // 30 addresses each for an MX target and for a delegation's name
        // server: neither fits 512 bytes with its additional records.
        for i in 0..30 {
            text += &format!("mx1 A 10.0.0.{i}\nns.big A 10.0.1.{i}\n");
        }
        text += "mail MX 10 mx1\nbig NS ns.big\ninto-big CNAME host.big\n";
        let zone = load_zone_str(&text, &origin, Path::new("t.zone")).unwrap();
        let store = ZoneStore::with_zones(vec![zone]);
        let h = Handler::default();
        let udp = |name: &str, t| {
            let req = Request::new(1, Query::query(Name::from_ascii(name).unwrap(), t));
            let bytes = h.reply(&store.snapshot(), &req, Transport::Udp);
            hickory_proto::op::Message::from_vec(&bytes).unwrap()
        };
        let mx = udp("mail.example.com.", RecordType::MX);
        assert!(!mx.metadata.truncation, "the answer is whole");
        assert_eq!((mx.answers.len(), mx.additionals.len()), (1, 0));
        for name in ["host.big.example.com.", "into-big.example.com."] {
            let referral = udp(name, RecordType::A);
            assert!(referral.metadata.truncation, "{name}: glue is not optional");
            assert!(referral.answers.is_empty() && referral.additionals.is_empty());
        }
    }

    #[test]
    fn ds_at_a_served_child_apex_is_answered_by_the_parent() {
        let parent = load_zone_str(
            "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 1 3600 600 86400 60\n@ NS ns1\n\
             ns1 A 192.0.2.1\nchild NS ns1.child\nns1.child A 192.0.2.2\n\
             child DS 60485 5 1 2BB183AF5F22588179A53B0A98631FAD1A292118\n",
            &Name::from_str("example.com.").unwrap(),
            Path::new("p.zone"),
        )
        .unwrap();
        let child = load_zone_str(
            "$ORIGIN child.example.com.\n$TTL 300\n@ SOA ns1 h 1 3600 600 86400 60\n\
             @ NS ns1\nns1 A 192.0.2.2\n",
            &Name::from_str("child.example.com.").unwrap(),
            Path::new("c.zone"),
        )
        .unwrap();
        let store = ZoneStore::with_zones(vec![parent, child]);
        let h = Handler::default();
        let ask = |name: &str, t| {
            let req = Request::new(1, Query::query(Name::from_ascii(name).unwrap(), t));
            h.answer(&store.snapshot(), &req)
        };
        let ds = ask("Child.Example.com.", RecordType::DS);
        assert_eq!(ds.answers.len(), 1, "{ds:?}");
        assert_eq!(ds.answers[0].record_type(), RecordType::DS);
        // Other types at the child apex are the child's.
        let soa = ask("child.example.com.", RecordType::SOA);
        assert_eq!(soa.answers.len(), 1);
        assert!(soa.authoritative);
    }

    #[test]
    fn other_classes_and_meta_types() {
        let (store, h) = setup();
        let mut req = Request::new(
            1,
            Query::query(Name::from_str("ns1.example.com.").unwrap(), RecordType::A),
        );
        req.query.set_query_class(hickory_proto::rr::DNSClass::HS);
        assert_eq!(
            h.answer(&store.snapshot(), &req).rcode,
            ResponseCode::Refused
        );
        req.query.set_query_class(hickory_proto::rr::DNSClass::IN);
        req.query.set_query_type(RecordType::OPT);
        assert_eq!(
            h.answer(&store.snapshot(), &req).rcode,
            ResponseCode::FormErr
        );
    }
}
