//! The IXFR history of one zone, apart from its disk format: which diffs
//! are kept (chained serials, bounded by count, records and age), what an
//! IXFR from a serial is answered with, and whether a new diff is appended
//! to the zone's file or the file is rewritten. Pure; time is passed in.
//! `journal` keeps one per zone and does the file I/O.

use std::collections::{HashMap, VecDeque};

use hickory_proto::rr::{DNSClass, LowerName, Name, Record, RecordType};
use hickory_proto::serialize::binary::{
    BinDecodable, BinDecoder, BinEncodable, BinEncoder, NameEncoding,
};
use serde::Deserialize;

use crate::zone::serial::is_newer;
use crate::zone::{Zone, ZoneDiff};

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct JournalLimits {
    /// Diffs kept per zone (more while the zone's image on disk is
    /// older: see [`History::keep_from`]).
    pub max_changes: usize,
    /// Records (removed + added) kept per zone, summed over its diffs.
    pub max_records: usize,
    /// Diffs older than this are dropped (0 = no age limit).
    pub max_age_secs: u64,
}

impl Default for JournalLimits {
    fn default() -> Self {
        JournalLimits {
            max_changes: 1000,
            max_records: 1_000_000,
            max_age_secs: 7 * 86_400,
        }
    }
}

/// One journalled change, with when it was made (unix seconds). Its
/// records are kept in wire form, names uncompressed (about 30 bytes a
/// record, where a hickory `Record` is some 250): a registry's history
/// holds a few records for every registration.
#[derive(Clone, Debug)]
pub struct Change {
    origin: Name,
    old_serial: Option<u32>,
    new_serial: Option<u32>,
    whole_zone: bool,
    /// How many of `records` are removed, then how many added.
    counts: (u32, u32),
    records: Box<[u8]>,
    pub at: u64,
}

impl Change {
    pub fn new(diff: &ZoneDiff, at: u64) -> Change {
        let mut records = Vec::new();
        emit_records(&mut records, diff.removed.iter().chain(&diff.added));
        Change {
            origin: diff.origin.clone(),
            old_serial: diff.old_serial,
            new_serial: diff.new_serial,
            whole_zone: diff.whole_zone,
            counts: (diff.removed.len() as u32, diff.added.len() as u32),
            records: records.into_boxed_slice(),
            at,
        }
    }

    /// A change whose records are already in the form [`emit_records`]
    /// writes (a journal file's diff frame): `counts.0` removed, then
    /// `counts.1` added, in `records`.
    pub fn from_wire(
        origin: Name,
        (old_serial, new_serial): (u32, u32),
        counts: (u32, u32),
        records: &[u8],
        at: u64,
    ) -> Change {
        Change {
            origin,
            old_serial: Some(old_serial),
            new_serial: Some(new_serial),
            whole_zone: false,
            counts,
            records: records.into(),
            at,
        }
    }

    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// The removed then the added records as [`emit_records`] wrote
    /// them, and how many of each.
    pub fn records(&self) -> (&[u8], (u32, u32)) {
        (&self.records, self.counts)
    }

    /// The diff, decoded.
    pub fn diff(&self) -> ZoneDiff {
        let mut d = BinDecoder::new(&self.records);
        let mut read =
            |n: u32| -> Vec<Record> { (0..n).filter_map(|_| Record::read(&mut d).ok()).collect() };
        let removed = read(self.counts.0);
        let added = read(self.counts.1);
        self.with_records(removed, added)
    }

    /// The diff, decoded; `None` if a record does not decode (a change
    /// taken from a file as it was, see [`Change::from_wire`]).
    pub fn decoded(&self) -> Option<ZoneDiff> {
        let mut d = BinDecoder::new(&self.records);
        let mut read =
            |n: u32| -> Option<Vec<Record>> { (0..n).map(|_| Record::read(&mut d).ok()).collect() };
        let removed = read(self.counts.0)?;
        let added = read(self.counts.1)?;
        d.is_empty().then(|| self.with_records(removed, added))
    }

    fn with_records(&self, removed: Vec<Record>, added: Vec<Record>) -> ZoneDiff {
        ZoneDiff {
            origin: self.origin.clone(),
            old_serial: self.old_serial,
            new_serial: self.new_serial,
            removed,
            added,
            whole_zone: self.whole_zone,
        }
    }

    pub fn old_serial(&self) -> Option<u32> {
        self.old_serial
    }

    pub fn new_serial(&self) -> Option<u32> {
        self.new_serial
    }

    /// Records removed and added.
    pub fn size(&self) -> usize {
        (self.counts.0 + self.counts.1) as usize
    }
}

/// Appends `records` uncompressed, one encoder each: a zone's snapshot is
/// far larger than the 64 KiB one encoder can address, and without
/// compression every record decodes on its own. The journal's files and
/// the history in memory share this form.
pub fn emit_records<R: std::borrow::Borrow<Record>>(
    out: &mut Vec<u8>,
    records: impl Iterator<Item = R>,
) {
    let mut tmp = Vec::with_capacity(128);
    for r in records {
        tmp.clear();
        {
            let mut enc = BinEncoder::new(&mut tmp);
            let mut enc = enc.with_name_encoding(NameEncoding::Uncompressed);
            r.borrow().emit(&mut enc).expect("zone records encode");
        }
        out.extend_from_slice(&tmp);
    }
}

/// Appends every record of `zone` as [`emit_records`] would write
/// `zone.records()` with its SOA first, straight from the zone's packed
/// sets: a journal rewrite at a million instances made a `Record` of
/// each and encoded it again, most of the rewrite's time. The count.
pub fn emit_zone(out: &mut Vec<u8>, zone: &Zone) -> u32 {
    let soa = zone.soa_record();
    emit_records(out, soa.iter());
    let mut count = u32::from(soa.is_some());
    for (key, node) in zone.node_keys() {
        let sets = node.rrsets().iter().filter(|s| s.rtype != RecordType::SOA);
        let mut owner = None;
        for set in sets {
            let owner = owner.get_or_insert_with(|| {
                let mut wire = Vec::new();
                zone.write_name_of(key, &mut wire);
                wire
            });
            for rdata in set.wire() {
                out.extend_from_slice(owner);
                out.extend_from_slice(&u16::from(set.rtype).to_be_bytes());
                out.extend_from_slice(&u16::from(DNSClass::IN).to_be_bytes());
                out.extend_from_slice(&set.ttl.to_be_bytes());
                out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
                out.extend_from_slice(rdata);
                count += 1;
            }
        }
    }
    count
}

#[derive(Default)]
pub struct History {
    changes: VecDeque<Change>,
    records: usize,
    /// Diff frames in the zone's file since its snapshot, and the
    /// records they hold.
    file_diffs: usize,
    file_records: usize,
    /// The file could not be written: its end may be damaged, so nothing
    /// is appended to it until a rewrite succeeds (an append after damage
    /// would be lost at the next start, which stops reading there).
    pub file_damaged: bool,
    /// The serial of the zone's image on disk: the diffs from it on are
    /// kept whatever the count and age limits say, so a start that loads
    /// the image brings it forward from the journal instead of decoding
    /// the journal's own copy of the zone.
    keep_from: Option<u32>,
}

/// What the zone's file needs after a diff was pushed.
#[derive(Debug, PartialEq, Eq)]
pub enum Persist {
    /// Append the diff.
    Append,
    /// Rewrite the file, the history kept, then a snapshot of the zone
    /// (the file holds too many diffs, or the diff is larger than the
    /// zone): due, but the diff continues the file's chain, so it can be
    /// appended while the new file is written.
    Rewrite,
    /// The history was restarted: the file must be rewritten before
    /// anything is appended to it (its chain does not lead to the diff).
    Restart,
}

impl History {
    /// The serial the history ends at.
    pub fn last_serial(&self) -> Option<u32> {
        self.changes.back().and_then(|c| c.new_serial)
    }

    pub fn changes(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter()
    }

    /// The diff [`push`](Self::push) just took, as the history keeps it
    /// (`None` when the limits already dropped it).
    pub fn pushed(&self, diff: &ZoneDiff) -> Option<&Change> {
        self.changes
            .back()
            .filter(|c| (c.old_serial, c.new_serial) == (diff.old_serial, diff.new_serial))
    }

    /// Forgets every diff: IXFR starts from the current version.
    pub fn restart(&mut self) {
        self.changes.clear();
        self.records = 0;
    }

    /// A diff read back from the zone's file, in order.
    pub fn restored(&mut self, c: Change) {
        self.records += c.size();
        self.changes.push_back(c);
    }

    /// Takes the diff one commit made to the zone (which now holds
    /// `zone_records` records) at `now`. A diff that does not continue the
    /// chain (a new zone, or a serial that did not move forward) restarts
    /// the history: IXFR from before it is impossible.
    pub fn push(
        &mut self,
        diff: &ZoneDiff,
        zone_records: usize,
        now: u64,
        limits: &JournalLimits,
    ) -> Persist {
        let continues = match (diff.old_serial, self.changes.back()) {
            (Some(old), Some(last)) => last.new_serial == Some(old),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let serial_moves = match (diff.old_serial, diff.new_serial) {
            (Some(a), Some(b)) => is_newer(b, a),
            _ => false,
        };
        if !continues || !serial_moves {
            self.restart();
            return Persist::Restart;
        }
        self.restored(Change::new(diff, now));
        self.trim(limits, now);
        // A diff larger than the zone is better stored as a snapshot.
        let big = diff.removed.len() + diff.added.len() > zone_records.max(1024);
        // The file is rewritten (the whole zone encoded) once it holds
        // twice the diffs kept, and records in diffs as many as a quarter
        // of the snapshot's: a rewrite then costs a constant share of
        // what was appended, however large the zone (a million-name
        // registry zone took a core rewriting it every 2,000 commits),
        // and a start decodes at most a quarter zone's worth of diffs.
        let due = self.file_diffs >= 2 * limits.max_changes.max(1)
            && self.file_records >= zone_records / 4;
        if big || due {
            Persist::Rewrite
        } else {
            Persist::Append
        }
    }

    /// Notes a diff of `records` records appended to the zone's file.
    pub fn appended(&mut self, records: usize) {
        self.file_diffs += 1;
        self.file_records += records;
    }

    /// Notes the zone's file rewritten: a snapshot and no diffs after it.
    pub fn rewritten(&mut self) {
        self.file_diffs = 0;
        self.file_records = 0;
    }

    /// IXFR from `from` to `current`, the serial being served.
    pub fn ixfr(&self, current: u32, from: u32) -> Ixfr {
        if from == current || is_newer(from, current) {
            return Ixfr::Current;
        }
        // The history must end at the version being served.
        if self.last_serial() != Some(current) {
            return Ixfr::Unavailable;
        }
        let Some(start) = self.changes.iter().position(|c| c.old_serial == Some(from)) else {
            return Ixfr::Unavailable;
        };
        let diffs: Vec<ZoneDiff> = self.changes.iter().skip(start).map(Change::diff).collect();
        Ixfr::Diff(condense(diffs.iter()))
    }

    /// Oldest serial IXFR can start from, and the number of diffs held.
    pub fn span(&self) -> Option<(u32, usize)> {
        let first = self.changes.front()?.old_serial?;
        Some((first, self.changes.len()))
    }

    /// Keeps the diffs from `serial` on (the zone's image on disk is at
    /// it): the count and age limits no longer drop them, the record
    /// limit still does.
    pub fn keep_from(&mut self, serial: u32) {
        self.keep_from = Some(serial);
    }

    /// Whether these diffs alone bring the zone's image (at the serial
    /// given to [`History::keep_from`]) to `serial`, the zone's current
    /// one: none of them was trimmed or lost to a restart since the image.
    pub fn reaches_from_image(&self, serial: Option<u32>) -> bool {
        let Some(image) = self.keep_from else {
            return false;
        };
        serial == Some(image)
            || (self.last_serial() == serial
                && self.changes.iter().any(|c| c.old_serial == Some(image)))
    }

    /// Drops the oldest diffs beyond the limits.
    pub fn trim(&mut self, limits: &JournalLimits, now: u64) {
        while let Some(first) = self.changes.front() {
            let kept = self.keep_from.is_some() && first.old_serial == self.keep_from;
            let too_many = self.changes.len() > limits.max_changes && !kept;
            let too_big = self.records > limits.max_records && self.changes.len() > 1;
            let too_old = limits.max_age_secs > 0
                && now.saturating_sub(first.at) > limits.max_age_secs
                && !kept;
            if !(too_many || too_big || too_old) {
                break;
            }
            let gone = self.changes.pop_front().expect("front exists");
            self.records -= gone.size();
        }
    }
}

/// What IXFR from a given serial can be answered with.
#[derive(Debug, PartialEq, Eq)]
pub enum Ixfr {
    /// The client already has the current serial.
    Current,
    /// The journal does not reach back to the client's serial: send AXFR.
    Unavailable,
    /// The condensed difference (SOAs first in each half).
    Diff(ZoneDiff),
}

/// Where the AXFR/IXFR planner finds a zone's history: the IXFR journal
/// in the server, [`NoHistory`] where there is none.
pub trait IxfrSource: Send + Sync {
    /// IXFR from serial `from` for `zone` (its current version).
    fn ixfr(&self, zone: &Zone, from: u32) -> Ixfr;
}

/// No history at all: a client at the current serial (or newer) gets the
/// SOA, every other one AXFR.
pub struct NoHistory;

impl IxfrSource for NoHistory {
    fn ixfr(&self, zone: &Zone, from: u32) -> Ixfr {
        match zone.serial() {
            Some(current) => without_history(current, from),
            None => Ixfr::Unavailable,
        }
    }
}

/// The answer for a zone the history does not hold.
pub fn without_history(current: u32, from: u32) -> Ixfr {
    if from == current || is_newer(from, current) {
        Ixfr::Current
    } else {
        Ixfr::Unavailable
    }
}

/// Record identity for condensing: owner, type, data and TTL.
type RecordKey = (LowerName, RecordType, Vec<u8>, u32);

fn key_of(r: &Record) -> RecordKey {
    let mut data = Vec::new();
    let _ = r.data.emit(&mut BinEncoder::new(&mut data));
    (LowerName::new(&r.name), r.record_type(), data, r.ttl)
}

/// Folds consecutive diffs into one: what the first version had that the
/// last lacks, and the reverse (RFC 1995 §4 allows condensing).
pub fn condense<'a>(diffs: impl Iterator<Item = &'a ZoneDiff>) -> ZoneDiff {
    let mut removed: HashMap<RecordKey, Record> = HashMap::new();
    let mut added: HashMap<RecordKey, Record> = HashMap::new();
    let mut out = ZoneDiff::default();
    let mut first = true;
    let mut old_soa = None;
    let mut new_soa = None;
    for d in diffs {
        if first {
            out.origin = d.origin.clone();
            out.old_serial = d.old_serial;
            old_soa = d
                .removed
                .iter()
                .find(|r| r.record_type() == RecordType::SOA)
                .cloned();
            first = false;
        }
        out.new_serial = d.new_serial;
        if let Some(soa) = d.added.iter().find(|r| r.record_type() == RecordType::SOA) {
            new_soa = Some(soa.clone());
        }
        for r in d
            .removed
            .iter()
            .filter(|r| r.record_type() != RecordType::SOA)
        {
            let k = key_of(r);
            if added.remove(&k).is_none() {
                removed.insert(k, r.clone());
            }
        }
        for r in d
            .added
            .iter()
            .filter(|r| r.record_type() != RecordType::SOA)
        {
            let k = key_of(r);
            if removed.remove(&k).is_none() {
                added.insert(k, r.clone());
            }
        }
    }
    let sorted = |m: HashMap<RecordKey, Record>| {
        let mut v: Vec<(RecordKey, Record)> = m.into_iter().collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.into_iter().map(|(_, r)| r)
    };
    out.removed = old_soa.into_iter().chain(sorted(removed)).collect();
    out.added = new_soa.into_iter().chain(sorted(added)).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, SOA};
    use hickory_proto::rr::{Name, RData};

    #[test]
    fn a_zone_is_written_from_its_sets_as_its_records_would_be() {
        let text = "\
$ORIGIN Example.COM.
$TTL 300
@ SOA ns1 hostmaster 7 3600 600 86400 60
@ NS ns1
@ MX 10 Mail.example.com.
@ TXT \"v=spf1 -all\" \"two strings\"
@ CAA 0 issue \"letsencrypt.org\"
@ HTTPS 1 . alpn=h2,h3 ipv4hint=192.0.2.1
@ DNSKEY 257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==
NS1 A 192.0.2.53
ns1 AAAA 2001:db8::53
_sip._tcp SRV 10 60 5060 SIP.example.com.
alias CNAME www
www A 192.0.2.1
www A 192.0.2.2
*.wild A 192.0.2.3
x NAPTR 100 10 \"U\" \"E2U+sip\" \"!^.*$!sip:info@example.com!\" .
t TLSA 3 1 1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
u TYPE65280 \\# 4 0A000001
www RRSIG A 13 3 300 20301231000000 20201231000000 12345 example.com. AAAA
";
        let origin = Name::from_ascii("example.com.").unwrap();
        let zone = crate::zone::load_zone_str(text, &origin, std::path::Path::new("t")).unwrap();
        let others = zone
            .records()
            .filter(|r| r.record_type() != RecordType::SOA);
        let mut by_record = Vec::new();
        emit_records(&mut by_record, zone.soa_record().into_iter().chain(others));
        let mut by_set = Vec::new();
        assert_eq!(emit_zone(&mut by_set, &zone) as usize, zone.record_count());
        assert_eq!(by_set, by_record);
    }

    fn soa(serial: u32) -> Record {
        let n = Name::from_ascii("example.").unwrap();
        Record::from_rdata(
            n.clone(),
            60,
            RData::SOA(SOA::new(n.clone(), n, serial, 1, 1, 1, 1)),
        )
    }

    /// The diff from `from` to `to` adding one A record.
    fn diff(from: u32, to: u32) -> ZoneDiff {
        let n = Name::from_ascii(format!("h{to}.example.")).unwrap();
        ZoneDiff {
            origin: Name::from_ascii("example.").unwrap(),
            old_serial: Some(from),
            new_serial: Some(to),
            removed: vec![soa(from)],
            added: vec![
                soa(to),
                Record::from_rdata(n, 60, RData::A(A::new(192, 0, 2, to as u8))),
            ],
            whole_zone: false,
        }
    }

    /// A change keeps its records in wire form and gives back the diff
    /// it was made from, names' case and every type included.
    #[test]
    fn a_change_gives_back_the_diff_it_was_made_from() {
        use hickory_proto::rr::rdata::{SRV, TXT};
        let mut d = diff(4, 5);
        let n = Name::from_ascii("_x._tcp.Example.").unwrap();
        let target = Name::from_ascii("H5.example.").unwrap();
        d.added.push(Record::from_rdata(
            n.clone(),
            30,
            RData::SRV(SRV::new(0, 1, 80, target)),
        ));
        d.removed.push(Record::from_rdata(
            n,
            30,
            RData::TXT(TXT::new(vec!["id=a".into()])),
        ));
        let c = Change::new(&d, 77);
        assert_eq!(c.diff(), d);
        assert_eq!(
            (c.old_serial(), c.new_serial(), c.size(), c.at),
            (Some(4), Some(5), 5, 77)
        );
    }

    const DAY: u64 = 86_400;

    #[test]
    fn diffs_age_out_on_the_clock_they_are_given() {
        let limits = JournalLimits {
            max_age_secs: DAY,
            ..JournalLimits::default()
        };
        let mut h = History::default();
        for (i, at) in [0, DAY / 2, DAY, 2 * DAY].into_iter().enumerate() {
            let s = i as u32 + 1;
            assert_eq!(h.push(&diff(s, s + 1), 10, at, &limits), Persist::Append);
        }
        // At 2 days, the diffs made at 0 s and 12 h are older than a day.
        assert_eq!(h.span(), Some((3, 2)));
        assert!(matches!(h.ixfr(5, 3), Ixfr::Diff(_)));
        assert_eq!(h.ixfr(5, 1), Ixfr::Unavailable, "aged out: AXFR");
        assert_eq!(h.ixfr(5, 5), Ixfr::Current);
    }

    /// The diffs since the zone's image stay beyond the count and age
    /// limits (a start brings the image forward through them); older
    /// ones go, and the record limit still bounds them all.
    #[test]
    fn the_diffs_since_the_image_outlive_the_count_and_age_limits() {
        let limits = JournalLimits {
            max_changes: 2,
            max_records: 1_000,
            max_age_secs: DAY,
        };
        let mut h = History::default();
        h.push(&diff(1, 2), 10, 0, &limits);
        h.keep_from(2);
        for s in 2..10 {
            h.push(&diff(s, s + 1), 10, 2 * DAY, &limits);
        }
        assert_eq!(h.span(), Some((2, 8)), "from the image's serial on");
        assert!(matches!(h.ixfr(10, 2), Ixfr::Diff(_)));
        assert_eq!(h.ixfr(10, 1), Ixfr::Unavailable, "before the image: gone");
        // The image moves on: the diffs before it go again.
        h.keep_from(8);
        h.trim(&limits, 2 * DAY);
        assert_eq!(h.span(), Some((8, 2)));
        // Records: each diff holds three; 1,000 bound even the kept ones.
        h.keep_from(8);
        for s in 10..400 {
            h.push(&diff(s, s + 1), 10, 2 * DAY, &limits);
        }
        let (_, held) = h.span().unwrap();
        assert!(held * 3 <= 1_000, "{held} diffs kept");
    }

    #[test]
    fn a_broken_chain_restarts_the_history_and_rewrites_the_file() {
        let limits = JournalLimits::default();
        let mut h = History::default();
        assert_eq!(h.push(&diff(1, 2), 10, 0, &limits), Persist::Append);
        assert_eq!(
            h.push(&diff(7, 8), 10, 0, &limits),
            Persist::Restart,
            "not from 2"
        );
        assert_eq!(h.span(), None);
        assert_eq!(
            h.push(&diff(8, 8), 10, 0, &limits),
            Persist::Restart,
            "serial did not move"
        );
        assert_eq!(h.push(&diff(8, 9), 10, 0, &limits), Persist::Append);
        assert_eq!(h.ixfr(9, 8).clone_serials(), Some((8, 9)));
    }

    #[test]
    fn count_and_size_limits_keep_the_newest_diffs_and_compaction_comes_due() {
        let limits = JournalLimits {
            max_changes: 3,
            max_records: 1_000,
            max_age_secs: 0,
        };
        let mut h = History::default();
        let mut persists = Vec::new();
        for s in 1..=8 {
            h.appended(2); // as the journal does after each append
            persists.push(h.push(&diff(s, s + 1), 10, 0, &limits));
        }
        assert_eq!(h.span(), Some((6, 3)), "the newest three");
        assert!(
            persists.contains(&Persist::Rewrite),
            "2 × max_changes diffs in the file, records a quarter of the zone's: compact"
        );
        let big = ZoneDiff {
            added: (0..2000).map(|_| soa(99)).collect(),
            ..diff(9, 10)
        };
        assert_eq!(
            h.push(&big, 100, 0, &limits),
            Persist::Rewrite,
            "larger than the zone"
        );
    }

    /// In a large zone, small diffs are appended well past twice the
    /// diffs kept: the file is rewritten once its diffs hold a quarter as
    /// many records as the zone.
    #[test]
    fn a_large_zone_is_rewritten_once_its_diffs_hold_a_quarter_as_many_records() {
        let limits = JournalLimits {
            max_changes: 3,
            max_records: 1_000,
            max_age_secs: 0,
        };
        let mut h = History::default();
        let zone_records = 400;
        let mut first_rewrite = None;
        for s in 1..=80 {
            h.appended(2);
            if h.push(&diff(s, s + 1), zone_records, 0, &limits) == Persist::Rewrite {
                first_rewrite.get_or_insert(s);
                h.rewritten();
            }
        }
        assert_eq!(
            first_rewrite,
            Some(50),
            "a quarter of 400 records in 50 diffs of 2"
        );
        assert_eq!(h.span(), Some((78, 3)), "the history keeps its limits");
    }

    impl Ixfr {
        fn clone_serials(&self) -> Option<(u32, u32)> {
            match self {
                Ixfr::Diff(d) => Some((d.old_serial?, d.new_serial?)),
                _ => None,
            }
        }
    }
}
