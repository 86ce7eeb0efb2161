//! What happened last to each zone's source: the last load (zone file)
//! or transfer (secondary zone) attempt with its time and result, when a
//! secondary copy expires without a refresh, and incoming transfers
//! counted by outcome. Failures never reach the store (the old version
//! keeps serving), so they are recorded here for `ctl zones` and
//! `/metrics`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use hickory_proto::rr::{LowerName, Name};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadRecord {
    /// Unix seconds.
    pub at: u64,
    pub ok: bool,
    /// What was loaded, or the error.
    pub detail: String,
    /// Secondary zones: unix seconds at which the copy expires unless
    /// refreshed (last good refresh + SOA expire).
    pub expires_at: Option<u64>,
}

/// Outcomes of incoming transfer attempts, as labelled in `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TransferOutcome {
    Axfr,
    Ixfr,
    UpToDate,
    Failed,
}

impl TransferOutcome {
    pub fn label(self) -> &'static str {
        match self {
            TransferOutcome::Axfr => "axfr",
            TransferOutcome::Ixfr => "ixfr",
            TransferOutcome::UpToDate => "up_to_date",
            TransferOutcome::Failed => "failed",
        }
    }
}

#[derive(Default)]
pub struct LoadLog {
    zones: Mutex<HashMap<LowerName, LoadRecord>>,
    transfers: Mutex<BTreeMap<(String, TransferOutcome), u64>>,
}

impl LoadLog {
    /// Records an attempt; a secondary's expiry time is kept until
    /// [`LoadLog::set_expiry`] changes it.
    pub fn record(&self, zone: &Name, at: u64, result: Result<String, String>) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        let entry = zones.entry(LowerName::new(zone)).or_default();
        entry.at = at;
        (entry.ok, entry.detail) = match result {
            Ok(d) => (true, d),
            Err(e) => (false, e),
        };
    }

    pub fn set_expiry(&self, zone: &Name, expires_at: Option<u64>) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        zones.entry(LowerName::new(zone)).or_default().expires_at = expires_at;
    }

    pub fn get(&self, zone: &LowerName) -> Option<LoadRecord> {
        let zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        zones.get(zone).cloned()
    }

    pub fn count_transfer(&self, zone: &Name, outcome: TransferOutcome) {
        let mut t = self.transfers.lock().unwrap_or_else(|p| p.into_inner());
        *t.entry((zone.to_string(), outcome)).or_default() += 1;
    }

    /// (zone, outcome, count) for every outcome seen.
    pub fn transfers(&self) -> Vec<(String, TransferOutcome, u64)> {
        let t = self.transfers.lock().unwrap_or_else(|p| p.into_inner());
        t.iter().map(|((z, o), n)| (z.clone(), *o, *n)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_attempt_wins_and_the_expiry_stays() {
        let log = LoadLog::default();
        let z = Name::from_ascii("Example.COM.").unwrap();
        log.set_expiry(&z, Some(500));
        log.record(&z, 10, Ok("serial 1".into()));
        log.record(&z, 20, Err("example.com.zone:3: bad TTL".into()));
        let r = log.get(&LowerName::new(&Name::from_ascii("example.com.").unwrap()));
        assert_eq!(
            r,
            Some(LoadRecord {
                at: 20,
                ok: false,
                detail: "example.com.zone:3: bad TTL".into(),
                expires_at: Some(500),
            })
        );
        log.count_transfer(&z, TransferOutcome::Ixfr);
        log.count_transfer(&z, TransferOutcome::Ixfr);
        log.count_transfer(&z, TransferOutcome::Failed);
        assert_eq!(
            log.transfers(),
            [
                ("Example.COM.".into(), TransferOutcome::Ixfr, 2),
                ("Example.COM.".into(), TransferOutcome::Failed, 1)
            ]
        );
    }
}
