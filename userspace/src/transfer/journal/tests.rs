use std::collections::BTreeSet;
use std::sync::Arc;

use hickory_proto::rr::rdata::{A, SOA, TXT};
use hickory_proto::rr::{Name, RData, Record};

use super::*;
use crate::zone::store::StoreError;
use crate::zone::{Change, ZoneStore};

fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

fn base_zone() -> Zone {
    let origin = name("example.com.");
    let soa = SOA::new(
        name("ns1.example.com."),
        name("h.example.com."),
        1,
        3600,
        600,
        86400,
        60,
    );
    let mut z = Zone::new(&origin);
    z.insert(Record::from_rdata(origin.clone(), 3600, RData::SOA(soa)))
        .unwrap();
    for i in 0..20u8 {
        z.insert(a(&format!("h{i}.example.com."), i, 60)).unwrap();
    }
    // Names in RDATA that a compressing encoder would point back from.
    let mx = hickory_proto::rr::rdata::MX::new(10, name("h1.example.com."));
    z.insert(Record::from_rdata(
        name("h1.example.com."),
        60,
        RData::MX(mx),
    ))
    .unwrap();
    let cname = hickory_proto::rr::rdata::CNAME(name("h2.example.com."));
    z.insert(Record::from_rdata(
        name("alias.example.com."),
        60,
        RData::CNAME(cname),
    ))
    .unwrap();
    z
}

fn a(owner: &str, last: u8, ttl: u32) -> Record {
    Record::from_rdata(name(owner), ttl, RData::A(A::new(10, 0, 0, last)))
}

/// A record's identity for comparisons: text form including the TTL.
fn key(r: &Record) -> String {
    format!(
        "{} {} {} {}",
        r.name.to_lowercase(),
        r.ttl,
        r.record_type(),
        r.data
    )
}

fn set(z: &Zone) -> BTreeSet<String> {
    z.records()
        .filter(|r| r.record_type() != hickory_proto::rr::RecordType::SOA)
        .map(|r| key(&r))
        .collect()
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xdpdns-ixfr-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A store whose commits feed `journal` in order, as the journal's
/// subscriber thread does; pumped after every write so the tests stay on
/// one thread.
struct FedStore {
    store: ZoneStore,
    feed: std::sync::Mutex<crate::zone::Subscription>,
    journal: Arc<IxfrJournal>,
}

impl FedStore {
    fn pump(&self) {
        let mut feed = self.feed.lock().unwrap();
        while let Some(item) = feed.try_next() {
            crate::transfer::journal_subscriber::record(&self.journal, &item);
        }
        // As the journal's thread does after each batch (it also puts a
        // file rewritten meanwhile in its place).
        self.journal.sync();
    }

    fn replace_zones(&self, zones: Vec<Zone>, remove: &[Name]) -> Vec<ZoneDiff> {
        let d = self.store.replace_zones(zones, remove, 0);
        self.pump();
        d
    }

    fn update(&self, origin: &Name, changes: &[Change]) -> Result<ZoneDiff, StoreError> {
        let d = self.store.update(origin, changes, 0);
        self.pump();
        d
    }

    fn install_transferred(&self, zone: Zone) -> Vec<ZoneDiff> {
        let d = self.store.install_transferred(zone);
        self.pump();
        d
    }

    fn snapshot(&self) -> Arc<crate::zone::Snapshot> {
        self.store.snapshot()
    }
}

fn store_with(journal: Arc<IxfrJournal>) -> FedStore {
    let store = ZoneStore::new();
    let (_, feed) = store.subscribe();
    FedStore {
        store,
        feed: std::sync::Mutex::new(feed),
        journal,
    }
}

/// The i-th change: adds a name, removes an old one, changes a TTL now
/// and then, and sometimes adds then removes the same record later.
fn change(i: u32) -> Vec<Change> {
    let mut out = vec![Change::Add(a(
        &format!("n{i}.example.com."),
        (i % 250) as u8,
        30,
    ))];
    if i >= 3 {
        out.push(Change::Remove(a(
            &format!("n{}.example.com.", i - 3),
            ((i - 3) % 250) as u8,
            30,
        )));
    }
    if i.is_multiple_of(7) {
        out.push(Change::Add(a(
            &format!("h{}.example.com.", i % 20),
            (i % 20) as u8,
            120 + i,
        )));
    }
    if i.is_multiple_of(5) {
        out.push(Change::Add(Record::from_rdata(
            name("txt.example.com."),
            60,
            RData::TXT(TXT::new(vec![format!("v{i}")])),
        )));
    }
    out
}

/// After 100 changes, IXFR from each of the last N serials is exactly the
/// difference between that version and the current one; older serials
/// get AXFR; and all of it holds again after reopening from disk.
#[test]
fn ixfr_from_any_journalled_serial_is_the_exact_condensed_diff_and_survives_reopen() {
    let dir = tmpdir("exact");
    let limits = JournalLimits {
        max_changes: 40,
        ..JournalLimits::default()
    };
    let (journal, recovered) = IxfrJournal::open(&dir, limits).unwrap();
    assert!(recovered.is_empty());
    let journal = Arc::new(journal);
    let store = store_with(journal.clone());
    let origin = name("example.com.");
    store.replace_zones(vec![base_zone()], &[]);
    let mut versions = vec![(1u32, set(&base_zone()))];
    for i in 0..100 {
        let d = store.update(&origin, &change(i)).unwrap();
        let z = store
            .snapshot()
            .zone(&LowerName::new(&origin))
            .unwrap()
            .clone();
        versions.push((d.new_serial.unwrap(), set(&z)));
    }
    let current = store
        .snapshot()
        .zone(&LowerName::new(&origin))
        .unwrap()
        .clone();
    assert_eq!(current.serial(), Some(101));

    let check = |journal: &IxfrJournal, zone: &Zone| {
        let now = set(zone);
        for (serial, then) in &versions {
            match journal.ixfr(zone, *serial) {
                Ixfr::Current => assert_eq!(*serial, 101),
                Ixfr::Unavailable => assert!(
                    *serial < 101 - 40,
                    "serial {serial} should be in the journal"
                ),
                Ixfr::Diff(d) => {
                    assert!(
                        *serial >= 101 - 40,
                        "serial {serial} is older than the journal"
                    );
                    assert_eq!(d.old_serial, Some(*serial));
                    assert_eq!(d.new_serial, Some(101));
                    assert_eq!(soa_serial(&d.removed[0]), Some(*serial), "old SOA first");
                    assert_eq!(soa_serial(&d.added[0]), Some(101), "new SOA first");
                    let removed: BTreeSet<String> = d.removed[1..].iter().map(key).collect();
                    let added: BTreeSet<String> = d.added[1..].iter().map(key).collect();
                    assert_eq!(removed.len(), d.removed.len() - 1, "no duplicates");
                    let want_removed: BTreeSet<String> = then.difference(&now).cloned().collect();
                    let want_added: BTreeSet<String> = now.difference(then).cloned().collect();
                    assert_eq!(removed, want_removed, "removed from {serial}");
                    assert_eq!(added, want_added, "added since {serial}");
                }
            }
        }
    };
    check(&journal, &current);
    assert_eq!(journal.span(&origin), Some((61, 40)));

    drop(store);
    drop(journal);
    let (reopened, recovered) = IxfrJournal::open(&dir, limits).unwrap();
    assert_eq!(recovered.len(), 1);
    let z = &recovered[0];
    assert_eq!(z.serial(), Some(101));
    assert_eq!(
        set(z),
        set(&current),
        "recovered zone equals the served one"
    );
    check(&reopened, z);
    let _ = std::fs::remove_dir_all(&dir);
}

fn soa_serial(r: &Record) -> Option<u32> {
    match &r.data {
        RData::SOA(s) => Some(s.serial),
        _ => None,
    }
}

#[test]
fn torn_tail_is_cut_and_the_rest_recovers() {
    let dir = tmpdir("torn");
    let (journal, _) = IxfrJournal::open(&dir, JournalLimits::default()).unwrap();
    let journal = Arc::new(journal);
    let store = store_with(journal.clone());
    let origin = name("example.com.");
    store.replace_zones(vec![base_zone()], &[]);
    for i in 0..5 {
        store.update(&origin, &change(i)).unwrap();
    }
    drop(store);
    drop(journal);
    let path = dir.join("example.com.ixfr");
    let len = std::fs::metadata(&path).unwrap().len();
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 3).unwrap(); // the last diff is torn
    let (reopened, recovered) = IxfrJournal::open(&dir, JournalLimits::default()).unwrap();
    assert_eq!(
        recovered[0].serial(),
        Some(5),
        "the torn sixth version is gone"
    );
    assert!(matches!(reopened.ixfr(&recovered[0], 1), Ixfr::Diff(_)));
    assert!(
        std::fs::metadata(&path).unwrap().len() < len - 3,
        "tail cut off"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn limits_bound_count_size_and_age() {
    let journal = Arc::new(IxfrJournal::in_memory(JournalLimits {
        max_changes: 1000,
        max_records: 10,
        max_age_secs: 0,
    }));
    let store = store_with(journal.clone());
    let origin = name("example.com.");
    store.replace_zones(vec![base_zone()], &[]);
    for i in 0..20 {
        store.update(&origin, &change(i)).unwrap();
    }
    let (_, held) = journal.span(&origin).unwrap();
    assert!(held < 10, "record budget trims old diffs: {held} kept");

    let mut h = History::default();
    let diff = |n: u32| {
        let diff = ZoneDiff {
            old_serial: Some(n),
            new_serial: Some(n + 1),
            ..ZoneDiff::default()
        };
        crate::transfer::ixfr_history::Change::new(&diff, u64::from(n) * 100)
    };
    for n in 0..10 {
        h.restored(diff(n));
    }
    h.trim(
        &JournalLimits {
            max_changes: 100,
            max_records: 100,
            max_age_secs: 250,
        },
        1000,
    );
    assert_eq!(
        h.changes().next().unwrap().at,
        800,
        "older than 250 s dropped"
    );
}

#[test]
fn a_serial_that_does_not_move_forward_restarts_the_history() {
    let journal = Arc::new(IxfrJournal::in_memory(JournalLimits::default()));
    let store = store_with(journal.clone());
    let origin = name("example.com.");
    store.replace_zones(vec![base_zone()], &[]);
    store.update(&origin, &change(0)).unwrap();
    assert_eq!(journal.span(&origin), Some((1, 1)));
    // A transferred zone whose serial went backwards (primary reset).
    let mut z = base_zone();
    z.insert(a("new.example.com.", 1, 60)).unwrap();
    store.install_transferred(z);
    assert_eq!(
        journal.span(&origin),
        None,
        "history before the reset is unusable"
    );
}

/// A tmpfs of `kib` KiB at `dir`, unmounted when dropped: a file system
/// that fills up, so writes fail part-way as on a full disk.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(dir: &Path, kib: u32) -> SmallFs {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting a tmpfs needs root (as the rest of the suite)");
        SmallFs(dir.to_path_buf())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A diff whose append fails part-way (disk full), then a rewrite that
/// fails too: the change after them, once there is space again, must not
/// be appended behind the damage (a restart stops reading there) but
/// rewrite the file, so a restart recovers every change.
#[test]
fn after_a_failed_append_and_rewrite_the_next_change_is_not_lost() {
    let dir = tmpdir("full");
    let fs = SmallFs::mount(&dir, 64);
    let journal_dir = dir.join("journal");
    let (journal, _) = IxfrJournal::open(&journal_dir, JournalLimits::default()).unwrap();
    let s = store_with(Arc::new(journal));
    s.replace_zones(vec![base_zone()], &[]);
    let origin = name("example.com.");
    s.update(&origin, &change(1)).unwrap();

    // Fill the file system to the last byte.
    let filler = dir.join("filler");
    {
        let mut f = File::create(&filler).unwrap();
        while f.write_all(&[0u8; 512]).is_ok() {}
        while f.write_all(&[0u8; 1]).is_ok() {}
    }
    let big = Record::from_rdata(
        name("big.example.com."),
        60,
        RData::TXT(TXT::new((0..40).map(|i| format!("{i:0>200}")).collect())),
    );
    s.update(&origin, &[Change::Add(big)]).unwrap();
    assert!(
        s.journal.zones.lock().unwrap()[&LowerName::new(&origin)].file_damaged,
        "the append and the rewrite failed"
    );

    std::fs::remove_file(&filler).unwrap();
    s.update(&origin, &change(2)).unwrap();
    let serial = s
        .snapshot()
        .zone(&LowerName::new(&origin))
        .unwrap()
        .serial();

    let (reopened, recovered) = IxfrJournal::open(&journal_dir, JournalLimits::default()).unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].serial(), serial, "the last change survives");
    assert_eq!(
        set(&recovered[0]),
        set(s.snapshot().zone(&LowerName::new(&origin)).unwrap())
    );
    assert!(
        matches!(reopened.ixfr(&recovered[0], 1), Ixfr::Diff(_)),
        "and the history from serial 1"
    );
    drop(fs);
}

/// Every record of `zone`, as [`key`]s, sorted.
fn all_records(zone: &Zone) -> Vec<String> {
    let mut out: Vec<String> = zone.records().map(|r| key(&r)).collect();
    out.sort();
    out
}

/// A caller holding the zone at the journal's newest serial (from its
/// image) gets the history without the zone decoded again; one holding it
/// at an older serial of the journal's chain has it brought forward by the
/// diffs after that serial, to exactly the journal's version; at a serial
/// outside the chain it gets the journal's zone. All keep IXFR working.
#[test]
fn an_open_holding_a_version_of_the_chain_skips_the_zone_but_keeps_the_history() {
    let dir = tmpdir("holding");
    let limits = JournalLimits::default();
    let origin = name("example.com.");
    let mut versions = Vec::new();
    {
        let (journal, _) = IxfrJournal::open(&dir, limits).unwrap();
        let store = store_with(Arc::new(journal));
        let current = || {
            let snapshot = store.snapshot();
            snapshot
                .zone(&LowerName::new(&origin))
                .unwrap()
                .as_ref()
                .clone()
        };
        store.replace_zones(vec![base_zone()], &[]);
        versions.push(current());
        for i in 0..5 {
            store.update(&origin, &change(i)).unwrap();
            versions.push(current());
        }
    }
    let newest = versions.last().unwrap().clone();
    assert_eq!(newest.serial(), Some(6));
    let key = LowerName::new(&origin);
    let mut held = HashMap::from([(key.clone(), newest.clone())]);
    let (journal, recovered) = IxfrJournal::open_holding(&dir, limits, &mut held).unwrap();
    assert!(recovered.is_empty(), "the held zone is not decoded again");
    assert!(journal.has_zone(&key));
    assert_eq!(journal.span(&origin).map(|(_, n)| n), Some(5));
    assert_eq!(held[&key].serial(), Some(6));

    // An image two commits behind: brought forward, not replaced.
    let behind = versions[3].clone();
    assert_eq!(behind.serial(), Some(4));
    let mut held = HashMap::from([(key.clone(), behind)]);
    let (journal, recovered) = IxfrJournal::open_holding(&dir, limits, &mut held).unwrap();
    assert!(recovered.is_empty(), "caught up from the held version");
    let caught_up = &held[&key];
    assert_eq!(caught_up.serial(), Some(6));
    assert_eq!(
        all_records(caught_up),
        all_records(&newest),
        "exactly the journal's newest version"
    );
    assert!(matches!(journal.ixfr(caught_up, 2), Ixfr::Diff(_)));

    // An image at a serial of the chain whose contents disagree with it
    // (its SOA's timers differ, so the diff's SOA does not replace it):
    // dropped half-changed, and the journal's zone served instead.
    let mut odd = versions[3].clone();
    let soa = SOA::new(
        name("ns1.example.com."),
        name("h.example.com."),
        4,
        7200,
        600,
        86400,
        60,
    );
    odd.insert(Record::from_rdata(origin.clone(), 3600, RData::SOA(soa)))
        .unwrap();
    assert_eq!(odd.serial(), Some(4));
    let mut held = HashMap::from([(key.clone(), odd)]);
    let (_, recovered) = IxfrJournal::open_holding(&dir, limits, &mut held).unwrap();
    assert!(held.is_empty(), "the damaged image is dropped");
    assert_eq!(recovered.len(), 1);
    assert_eq!(all_records(&recovered[0]), all_records(&newest));

    // A version the journal never had, older than its newest: the
    // journal's zone is returned.
    let stranger = |serial| {
        let mut zone = Zone::new(&origin);
        let soa = SOA::new(
            name("ns1.example.com."),
            name("h.example.com."),
            serial,
            3600,
            600,
            86400,
            60,
        );
        zone.insert(Record::from_rdata(origin.clone(), 3600, RData::SOA(soa)))
            .unwrap();
        zone
    };
    let mut held = HashMap::from([(key.clone(), stranger(0))]);
    let (journal, recovered) = IxfrJournal::open_holding(&dir, limits, &mut held).unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].serial(), Some(6));
    assert!(matches!(journal.ixfr(&recovered[0], 2), Ixfr::Diff(_)));

    // Newer than the journal's newest (its last diffs lost in a crash):
    // the held zone wins, so the journal's copy is not decoded at all;
    // IXFR to the held version, which the history does not reach, is
    // not offered.
    let mut held = HashMap::from([(key.clone(), stranger(99))]);
    let (journal, recovered) = IxfrJournal::open_holding(&dir, limits, &mut held).unwrap();
    assert!(recovered.is_empty(), "the journal's copy is not decoded");
    assert_eq!(held[&key].serial(), Some(99), "the held zone as it was");
    assert!(journal.has_zone(&key), "the history is kept");
    assert!(matches!(journal.ixfr(&held[&key], 2), Ixfr::Unavailable));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An image written long before the journal's last rewrite (its file
/// then starts with a snapshot newer than the image) is still brought
/// forward at open, through the diffs kept since it; without the image's
/// serial kept, the count limit drops them and the journal's own copy is
/// decoded instead.
#[test]
fn an_image_older_than_the_journals_snapshot_is_brought_forward_when_its_diffs_are_kept() {
    // Few diffs kept: the file is rewritten every four commits.
    let limits = JournalLimits {
        max_changes: 2,
        ..JournalLimits::default()
    };
    let origin = name("example.com.");
    let key = LowerName::new(&origin);
    for keep in [true, false] {
        let dir = tmpdir(&format!("image-kept-{keep}"));
        let (image, newest) = {
            let (journal, _) = IxfrJournal::open(&dir, limits).unwrap();
            let store = store_with(Arc::new(journal));
            let current = || store.snapshot().zone(&key).unwrap().as_ref().clone();
            store.replace_zones(vec![base_zone()], &[]);
            store.update(&origin, &change(0)).unwrap();
            let image = current();
            if keep {
                store.journal.keep_from(&key, image.serial().unwrap());
            }
            for i in 1..30 {
                store.update(&origin, &change(i)).unwrap();
            }
            (image, current())
        };
        assert_eq!(image.serial(), Some(2));
        assert_eq!(newest.serial(), Some(31));
        let mut held = HashMap::from([(key.clone(), image)]);
        let (journal, recovered) = IxfrJournal::open_holding(&dir, limits, &mut held).unwrap();
        if keep {
            assert!(recovered.is_empty(), "caught up from the image");
            assert_eq!(held[&key].serial(), Some(31));
            assert_eq!(all_records(&held[&key]), all_records(&newest));
            assert!(matches!(journal.ixfr(&newest, 2), Ixfr::Diff(_)));
        } else {
            assert_eq!(recovered.len(), 1, "the journal's copy, decoded");
            assert_eq!(all_records(&recovered[0]), all_records(&newest));
            assert_eq!(held[&key].serial(), Some(2), "the image left as it was");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A commit the journal cannot write is reported so (an UPDATE in it is
/// then answered SERVFAIL, not acknowledged), and the next one that can
/// be written is durable again.
#[test]
fn a_commit_that_cannot_be_written_is_not_reported_durable() {
    let dir = tmpdir("unwritable");
    let (journal, _) = IxfrJournal::open(&dir, JournalLimits::default()).unwrap();
    let journal = Arc::new(journal);
    let store = ZoneStore::new();
    let (snapshot, feed) = store.subscribe();
    let mut journaled =
        crate::transfer::journal_subscriber::start(journal, feed, snapshot.version());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    store.replace_zones(vec![base_zone()], &[], 0);
    let v = store.snapshot().version();
    assert!(rt.block_on(journaled.durable(v)), "a zone written");
    // The zone's file replaced by a directory (not empty): neither an
    // append nor a rewrite can succeed, even as root.
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "ixfr"))
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir_all(file.join("blocked")).unwrap();
    store
        .update(
            &name("example.com."),
            &[Change::Add(a("new.example.com.", 1, 60))],
            0,
        )
        .unwrap();
    let v = store.snapshot().version();
    assert!(
        !rt.block_on(journaled.durable(v)),
        "not on disk, not durable"
    );
    std::fs::remove_dir_all(&file).unwrap();
    store
        .update(
            &name("example.com."),
            &[Change::Add(a("newer.example.com.", 2, 60))],
            0,
        )
        .unwrap();
    let v = store.snapshot().version();
    assert!(rt.block_on(journaled.durable(v)), "written again");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A diff frame as the journal wrote them before its history kept wire
/// form: one encoder for the whole payload, names compressed against it.
fn compressed_diff_frame(diff: &ZoneDiff, at: u64) -> Vec<u8> {
    use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
    let current = encode_diff(&super::Change::new(diff, at));
    let header = 1 + 8 + 2 + diff.origin.to_ascii().len() + 16;
    let mut buf = current[..header].to_vec();
    let mut enc = BinEncoder::new(&mut buf);
    enc.set_offset(header);
    for r in diff.removed.iter().chain(&diff.added) {
        r.emit(&mut enc).unwrap();
    }
    buf
}

#[test]
fn diff_frames_read_back_whether_their_names_are_compressed_or_not() {
    let soa = |serial| {
        let z = base_zone();
        let mut r = z.soa_record().unwrap();
        if let RData::SOA(s) = &mut r.data {
            s.serial = serial;
        }
        r
    };
    let mx = |pref| {
        Record::from_rdata(
            name("h3.example.com."),
            60,
            RData::MX(hickory_proto::rr::rdata::MX::new(
                pref,
                name("h4.example.com."),
            )),
        )
    };
    let srv = Record::from_rdata(
        name("_sip._udp.example.com."),
        60,
        RData::SRV(hickory_proto::rr::rdata::SRV::new(
            0,
            5,
            5060,
            name("h5.example.com."),
        )),
    );
    let diff = ZoneDiff {
        origin: name("example.com."),
        old_serial: Some(1),
        new_serial: Some(2),
        removed: vec![soa(1), mx(10)],
        added: vec![soa(2), mx(20), srv, a("h6.example.com.", 6, 60)],
        whole_zone: false,
    };
    let current = encode_diff(&super::Change::new(&diff, 7));
    let compressed = compressed_diff_frame(&diff, 7);
    assert!(compressed.len() < current.len(), "the old form compresses");
    // The current form is taken as it is; the old one is decoded.
    let header = 1 + 8 + 2 + "example.com.".len() + 16;
    assert!(uncompressed_records(&current[header..], 6));
    assert!(!uncompressed_records(&compressed[header..], 6));
    assert!(
        !uncompressed_records(&current[header..], 5),
        "a record left over"
    );
    for payload in [&current, &compressed] {
        let Some(Frame::Diff(c)) = decode_frame(payload) else {
            panic!("a diff frame");
        };
        let back = c.decoded().expect("every record decodes");
        assert_eq!(
            (back.old_serial, back.new_serial, c.at),
            (Some(1), Some(2), 7)
        );
        assert_eq!(back.removed, diff.removed);
        assert_eq!(back.added, diff.added);
        // Held in the current form, whichever form it was read from.
        assert_eq!(encode_diff(&c), current);
    }
    // A frame whose names run off its end is no diff.
    assert!(decode_frame(&current[..current.len() - 3]).is_none());
}

#[test]
fn a_name_compressed_in_record_data_is_not_taken_as_it_is() {
    // Owner names written out, the name in the record data a pointer:
    // only a walk of the data sees the frame is in the old form.
    let record = |rtype: u16, rdata: &[u8]| {
        let mut r = b"\x07example\x03com\x00".to_vec();
        r.extend_from_slice(&rtype.to_be_bytes());
        r.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
        r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        r.extend_from_slice(rdata);
        r
    };
    let pointer = [0xc0, 0x0c];
    let written = b"\x04mail\x07example\x03com\x00";
    let mx = |exchange: &[u8]| record(15, &[&[0, 10][..], exchange].concat());
    assert!(uncompressed_records(&mx(written), 1));
    assert!(!uncompressed_records(&mx(&pointer), 1));
    assert!(uncompressed_records(&record(2, written), 1));
    assert!(!uncompressed_records(&record(2, &pointer), 1));
    let soa = |mname: &[u8]| record(6, &[mname, &written[..], &[0; 20][..]].concat());
    assert!(uncompressed_records(&soa(written), 1));
    assert!(!uncompressed_records(&soa(&pointer), 1));
    // Record data that ends inside a name, or runs past it.
    assert!(!uncompressed_records(&record(2, &written[..5]), 1));
    assert!(!uncompressed_records(
        &record(2, &[written, &[0][..]].concat()),
        1
    ));
}

/// A file that comes due for a rewrite is rewritten beside its appends:
/// until the new file takes its place, every commit is appended to the
/// old one, so a kill at any moment of the rewrite recovers every commit
/// (at a million instances a rewrite takes seconds); once in place, the
/// new file holds the commits appended meanwhile after its snapshot.
#[test]
fn a_rewrite_beside_the_appends_loses_nothing_before_or_after_it_lands() {
    let dir = tmpdir("beside");
    let killed = tmpdir("beside-killed");
    let limits = JournalLimits {
        max_changes: 2,
        ..JournalLimits::default()
    };
    let (journal, _) = IxfrJournal::open(&dir, limits).unwrap();
    let journal = Arc::new(journal);
    let store = ZoneStore::new();
    let (_, mut feed) = store.subscribe();
    let origin = name("example.com.");
    let key = LowerName::new(&origin);
    // Recorded as the journal's thread records them, but with no sync
    // between: nothing puts a new file in place.
    let record = |feed: &mut crate::zone::Subscription| {
        while let Some(item) = feed.try_next() {
            assert!(crate::transfer::journal_subscriber::record(&journal, &item));
        }
    };
    store.replace_zones(vec![base_zone()], &[], 0);
    record(&mut feed);
    let mut since_rewrite = None;
    for i in 0..30 {
        store.update(&origin, &change(i), 0).unwrap();
        record(&mut feed);
        let rewriting = journal.rewriting.lock().unwrap();
        if let Some(r) = rewriting.get(&key) {
            since_rewrite.get_or_insert(i);
            assert_eq!(
                r.after_records.len() as u32,
                i - since_rewrite.unwrap(),
                "every commit after the rewrite began waits to follow its snapshot"
            );
        }
    }
    let since_rewrite = since_rewrite.expect("a rewrite came due");
    assert!(
        since_rewrite < 20,
        "the rewrite began at commit {since_rewrite}"
    );
    let current = store.snapshot().zone(&key).unwrap().clone();
    assert_eq!(current.serial(), Some(31));

    // Killed now: the old file, never replaced, holds every commit.
    std::fs::create_dir_all(&killed).unwrap();
    let file = dir.join("example.com.ixfr");
    std::fs::copy(&file, killed.join("example.com.ixfr")).unwrap();
    let (_, recovered) = IxfrJournal::open(&killed, limits).unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].serial(), Some(31));
    assert_eq!(set(&recovered[0]), set(&current), "killed mid-rewrite");

    // Landed: the new file replaces the old with the commits since.
    let before = std::fs::metadata(&file).unwrap().len();
    journal.settle();
    assert!(journal.rewriting.lock().unwrap().is_empty());
    assert!(
        !dir.join("example.com.tmp").exists(),
        "no temporary file left"
    );
    let after = std::fs::metadata(&file).unwrap().len();
    assert_ne!(before, after, "the file was replaced");
    // Appends go on into the new file.
    store.update(&origin, &change(30), 0).unwrap();
    record(&mut feed);
    journal.sync();
    let current = store.snapshot().zone(&key).unwrap().clone();
    let (reopened, recovered) = IxfrJournal::open(&dir, limits).unwrap();
    assert_eq!(recovered[0].serial(), Some(32));
    assert_eq!(
        set(&recovered[0]),
        set(&current),
        "after the rewrite landed"
    );
    match reopened.ixfr(&recovered[0], 30) {
        Ixfr::Diff(d) => assert_eq!((d.old_serial, d.new_serial), (Some(30), Some(32))),
        other => panic!("IXFR from 30: {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&killed);
}

/// A zone its source rebuilds after a crash (the registry's) is appended
/// to without a sync of its own; any other zone's appends wait for the
/// next sync. Both read back alike at the next open: a killed process
/// loses no page it wrote.
#[test]
fn a_zone_rebuilt_by_its_source_is_appended_but_not_synced() {
    let limits = JournalLimits::default();
    let origin = name("example.com.");
    let key = LowerName::new(&origin);
    for rebuilt in [false, true] {
        let dir = tmpdir(&format!("rebuilt-{rebuilt}"));
        {
            let (journal, _) = IxfrJournal::open(&dir, limits).unwrap();
            let journal = Arc::new(journal);
            if rebuilt {
                journal.rebuilt_by_source([key.clone()]);
            }
            let store = store_with(journal.clone());
            store.replace_zones(vec![base_zone()], &[]);
            for i in 0..3 {
                store.store.update(&origin, &change(i), 0).unwrap();
            }
            let mut feed = store.feed.lock().unwrap();
            while let Some(item) = feed.try_next() {
                assert!(crate::transfer::journal_subscriber::record(&journal, &item));
            }
            let unsynced = journal.unsynced.lock().unwrap().len();
            assert_eq!(
                unsynced,
                usize::from(!rebuilt),
                "rebuilt by its source: {rebuilt}"
            );
        }
        let (journal, recovered) = IxfrJournal::open(&dir, limits).unwrap();
        assert_eq!(recovered.len(), 1);
        assert_eq!(recovered[0].serial(), Some(4), "every append read back");
        assert_eq!(journal.span(&origin).map(|(_, n)| n), Some(3));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Where zone images are written, a zone its source rebuilds keeps only
/// diffs in its file, rewrites included: a start brings the zone's image
/// forward through them, and without the image recovers nothing from the
/// file (the source rebuilds the zone). Without images the file keeps its
/// snapshot and recovers the zone alone.
#[test]
fn a_zone_rebuilt_by_its_source_keeps_no_snapshot_where_images_are_written() {
    // Few diffs kept: the file is rewritten every four commits.
    let limits = JournalLimits {
        max_changes: 2,
        ..JournalLimits::default()
    };
    let origin = name("example.com.");
    let key = LowerName::new(&origin);
    for imaged in [true, false] {
        let dir = tmpdir(&format!("diffs-only-{imaged}"));
        let (image, newest) = registry_zone(&dir, limits, imaged, 29);
        assert_eq!((image.serial(), newest.serial()), (Some(2), Some(31)));

        let bytes = std::fs::read(dir.join("example.com.ixfr")).unwrap();
        let frames: Vec<Frame> = crate::frames::frames(&bytes)
            .map(|(body, _)| decode_frame(body).expect("a frame of the journal"))
            .collect();
        let snapshots = frames
            .iter()
            .filter(|f| !matches!(f, Frame::Diff(_)))
            .count();
        assert_eq!(snapshots, usize::from(!imaged), "images written: {imaged}");
        match frames.first() {
            Some(Frame::Diff(first)) => assert_eq!(
                first.old_serial(),
                Some(2),
                "rewritten from the image's serial on (the first diff dropped)"
            ),
            _ => panic!("the file starts with the history kept"),
        }

        let (_, recovered) = IxfrJournal::open(&dir, limits).unwrap();
        assert_eq!(
            recovered.len(),
            usize::from(!imaged),
            "without an image, only a snapshot recovers the zone"
        );
        if let Some(zone) = recovered.first() {
            assert_eq!(all_records(zone), all_records(&newest));
        }

        let mut held = HashMap::from([(key.clone(), image)]);
        let (journal, recovered) = IxfrJournal::open_holding(&dir, limits, &mut held).unwrap();
        assert!(recovered.is_empty(), "caught up from the image");
        assert_eq!(held[&key].serial(), Some(31));
        assert_eq!(all_records(&held[&key]), all_records(&newest));
        assert!(matches!(journal.ixfr(&newest, 2), Ixfr::Diff(_)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The frames of zone example.com.'s file in `dir`: each diff's old and
/// new serial, `None` for a snapshot.
fn frames_of(dir: &Path) -> Vec<Option<(Option<u32>, Option<u32>)>> {
    let bytes = std::fs::read(dir.join("example.com.ixfr")).unwrap();
    crate::frames::frames(&bytes)
        .map(
            |(body, _)| match decode_frame(body).expect("a frame of the journal") {
                Frame::Diff(c) => Some((c.old_serial(), c.new_serial())),
                _ => None,
            },
        )
        .collect()
}

/// A journal of a zone rebuilt by its source (with images written when
/// `imaged`), whose image is at serial 2 and whose history then took
/// `commits` more: the image and the newest version.
fn registry_zone(dir: &Path, limits: JournalLimits, imaged: bool, commits: u32) -> (Zone, Zone) {
    let origin = name("example.com.");
    let key = LowerName::new(&origin);
    let (journal, _) = IxfrJournal::open(dir, limits).unwrap();
    let journal = Arc::new(journal);
    journal.rebuilt_by_source([key.clone()]);
    if imaged {
        journal.images_written();
    }
    let store = store_with(journal.clone());
    let current = || store.snapshot().zone(&key).unwrap().as_ref().clone();
    store.replace_zones(vec![base_zone()], &[]);
    store.update(&origin, &change(0)).unwrap();
    let image = current();
    journal.keep_from(&key, image.serial().unwrap());
    for i in 1..=commits {
        store.update(&origin, &change(i)).unwrap();
    }
    journal.settle();
    (image, current())
}

/// Where the history no longer reaches back to the image (the record
/// limit dropped the diffs since it), the file keeps its snapshot: a
/// start without the diffs would otherwise serve the image, a version
/// older than one served.
#[test]
fn a_rebuilt_zone_whose_diffs_since_its_image_were_trimmed_keeps_its_snapshot() {
    let dir = tmpdir("diffs-trimmed");
    let limits = JournalLimits {
        max_changes: 2,
        max_records: 8,
        ..JournalLimits::default()
    };
    let (_, newest) = registry_zone(&dir, limits, true, 29);
    let frames = frames_of(&dir);
    assert!(frames.contains(&None), "a snapshot: {frames:?}");
    let (_, recovered) = IxfrJournal::open(&dir, limits).unwrap();
    assert_eq!(recovered.len(), 1, "the file alone recovers the zone");
    assert_eq!(all_records(&recovered[0]), all_records(&newest));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An image older than a diffs-only file's history is served as it is,
/// and the history it cannot follow is started over at the next commit,
/// its file rewritten: the file never chains a diff from the image onto
/// diffs that end at another serial.
#[test]
fn an_image_older_than_a_diffs_only_history_starts_it_over_at_the_next_commit() {
    let dir = tmpdir("diffs-gap");
    let limits = JournalLimits {
        max_changes: 2,
        ..JournalLimits::default()
    };
    let origin = name("example.com.");
    let key = LowerName::new(&origin);
    registry_zone(&dir, limits, true, 29);
    assert_eq!(frames_of(&dir).first(), Some(&Some((Some(2), Some(3)))));

    // The image on disk is older than the file's first diff.
    let mut held = HashMap::from([(key.clone(), base_zone())]);
    let (journal, recovered) = IxfrJournal::open_holding(&dir, limits, &mut held).unwrap();
    assert!(recovered.is_empty());
    assert_eq!(held[&key].serial(), Some(1), "the image served as it is");
    let journal = Arc::new(journal);
    journal.rebuilt_by_source([key.clone()]);
    journal.images_written();
    // As a start does: the image restored before the journal subscribes.
    let store = ZoneStore::new();
    store.restore_zones(vec![held.remove(&key).unwrap()]);
    let (_, feed) = store.subscribe();
    let store = FedStore {
        store,
        feed: std::sync::Mutex::new(feed),
        journal: journal.clone(),
    };
    store.update(&origin, &change(100)).unwrap();
    journal.settle();
    assert_eq!(
        frames_of(&dir),
        [None],
        "the history started over, the file a snapshot of the new version"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
