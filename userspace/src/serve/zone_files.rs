//! The zone-file source: loads every configured zone file at start-up and
//! again on SIGHUP, and commits them to the store in one change.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use hickory_proto::rr::{LowerName, Name};
use tracing::{error, info, warn};

use super::handler::handler_for;
use crate::clock::unix_secs;
use crate::config::{Config, ZoneConfig};
use crate::dynamic::{Dynamic, ZoneFiles};
use crate::router::Router;
use crate::zone::image::{self, ImageError};
use crate::zone::{load_zone_file, LoadError, LoadLog, Zone, ZoneStore};

/// Loads every configured zone file; returns the zones that loaded and
/// the errors of those that did not. Secondary zones (no file) come from
/// their primaries.
pub fn load_zones(zones: &[ZoneConfig]) -> (Vec<Zone>, Vec<(Name, LoadError)>) {
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for z in zones {
        let origin = z.origin_name();
        let Some(file) = &z.file else { continue };
        match load_zone_file(file, &origin) {
            Ok(zone) => ok.push(zone),
            Err(e) => failed.push((origin, e)),
        }
    }
    (ok, failed)
}

/// What start-up loaded: zones to serve, the errors of those that did
/// not load, and the file zones served from an image their file changed
/// since (to be reloaded from the file once serving).
#[derive(Default)]
pub(super) struct StartLoad {
    /// Zones parsed from their files.
    pub parsed: Vec<Zone>,
    /// Zones read from their images (any source: file, secondary,
    /// registry).
    pub imaged: Vec<Zone>,
    pub failed: Vec<(Name, LoadError)>,
    /// File zones whose file changed since their image.
    pub stale: Vec<ZoneConfig>,
}

/// Start-up: every configured zone from its image in `images` when there
/// is one (read in a fraction of the time a large file takes to parse),
/// file zones without one from their files. A file zone whose file changed
/// since its image is served from the image all the same and listed in
/// [`StartLoad::stale`]; a damaged or unreadable image is ignored with
/// one log line.
pub(super) fn load_zones_at_start(config: &Config, images: Option<&Path>) -> StartLoad {
    let mut out = StartLoad::default();
    let registry = config.registry_zone_names().map(|n| (n, None));
    let configured = config.zones.iter().map(|z| (z.origin_name(), Some(z)));
    for (origin, zc) in configured.chain(registry) {
        if let Some(l) = images.and_then(|dir| read_image(dir, &origin)) {
            let file = zc.and_then(|z| z.file.as_ref());
            let current = file.is_none_or(|f| {
                crate::zone::disk::is_current(&l.stamp)
                    && l.stamp.files.first().is_some_and(|s| s.path == *f)
            });
            info!(zone = %origin, serial = l.zone.serial(), records = l.zone.record_count(),
                  current, "zone served from its image");
            if let (false, Some(zc)) = (current, zc) {
                out.stale.push(zc.clone());
            }
            let mut zone = l.zone;
            if file.is_some() {
                zone.set_source(l.stamp);
            }
            out.imaged.push(zone);
            continue;
        }
        let Some(file) = zc.and_then(|z| z.file.as_ref()) else {
            continue;
        };
        match load_zone_file(file, &origin) {
            Ok(zone) => out.parsed.push(zone),
            Err(e) => out.failed.push((origin, e)),
        }
    }
    out
}

fn read_image(dir: &Path, origin: &Name) -> Option<image::Loaded> {
    let path = image::path_in(dir, origin);
    match image::read(&path) {
        Ok(l) if l.zone.origin_key() == &LowerName::new(origin) => Some(l),
        Ok(_) => {
            warn!(zone = %origin, file = %path.display(), "zone image is of another zone; ignored");
            None
        }
        Err(ImageError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            warn!(zone = %origin, "zone image ignored, the zone loads from its source: {e}");
            None
        }
    }
}

/// Reloads the zone files of `stale` (served from out-of-date images) as
/// one normal change.
pub(super) fn reload_stale(stale: &[ZoneConfig], store: &ZoneStore, log: &LoadLog) {
    let (zones, failed) = load_zones(stale);
    for (origin, e) in &failed {
        error!(zone = %origin, "{e}; still serving the zone's image");
        log.record(origin, unix_secs(), Err(e.to_string()));
    }
    for z in &zones {
        record_loaded(log, z);
    }
    for d in store.replace_zones(zones, &[], unix_secs()) {
        info!(zone = %d.origin, old_serial = d.old_serial, new_serial = d.new_serial,
              removed = d.removed.len(), added = d.added.len(), "zone file changed since its image; reloaded");
    }
}

/// Reads the files of zones that take updates (start-up, SIGHUP), each
/// as a difference against the zone as served (`dynamic::files`). A zone
/// whose file does not load keeps serving what it served; at start-up one
/// with nothing to serve stops the start, as any zone file does.
pub(super) fn load_dynamic(
    files: &ZoneFiles,
    store: &ZoneStore,
    log: &LoadLog,
    at_start: bool,
) -> Result<(), LoadError> {
    for origin in files.origins() {
        match files.load(store, &origin) {
            Ok(outcome) => {
                info!(zone = %origin, ?outcome, "zone file of a zone that takes updates read");
                if let Some(z) = store.snapshot().zone(&LowerName::new(&origin)) {
                    record_loaded(log, z);
                }
            }
            Err(e) if at_start && store.snapshot().zone(&LowerName::new(&origin)).is_none() => {
                return Err(e)
            }
            Err(e) => {
                error!(zone = %origin, "{e}; still serving the zone as it was (with its updates)");
                log.record(&origin, unix_secs(), Err(e.to_string()));
            }
        }
    }
    Ok(())
}

/// Notes a zone file's successful load in `log`.
pub(super) fn record_loaded(log: &LoadLog, zone: &Zone) {
    let detail = format!(
        "loaded serial {}, {} records",
        zone.serial().unwrap_or(0),
        zone.record_count()
    );
    log.record(zone.origin(), unix_secs(), Ok(detail));
}

/// Every zone the config serves: files, secondaries and registry zones.
pub fn configured_origins(config: &Config) -> HashSet<LowerName> {
    config
        .zones
        .iter()
        .map(|z| z.origin_name())
        .chain(config.registry_zone_names())
        .chain(config.catalog_origin())
        .map(|n| LowerName::new(&n))
        .collect()
}

/// Drops the zone versions a reload replaced on this (low-priority)
/// thread: freeing a large zone takes a while, and whoever drops the last
/// reference pays for it, which must not be a query or registry task. A
/// version still held elsewhere after a short wait (a slow subscriber) is
/// left to its last holder.
fn free_here(mut zones: Vec<Arc<Zone>>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        zones.retain(|z| Arc::strong_count(z) > 1);
        if zones.is_empty() || std::time::Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// SIGHUP: re-read the config and every zone into one new snapshot. A zone
/// that fails to load keeps serving its previous version; a config that
/// fails to parse changes nothing. Returns the config now in force. What
/// follows (journal, NOTIFY, kernel table) follows the store's feed.
pub fn reload(
    path: &Path,
    old: &Config,
    store: &ZoneStore,
    router: &Router,
    log: &LoadLog,
    dynamic: &Dynamic,
) -> Option<Config> {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            error!("reload: {e}");
            return None;
        }
    };
    if config.server.listen != old.server.listen {
        warn!("reload: server.listen changed; restart to apply it");
    }
    router
        .transfer
        .store(Arc::new(config.settings.transfer.clone()));
    if let Some(files) = &dynamic.files {
        files.configure(&config);
    }
    if let Some(runtime) = &dynamic.runtime {
        let primaries = config
            .settings
            .transfer
            .update
            .primaries()
            .cloned()
            .collect();
        runtime.set_configured_primaries(primaries);
    }
    if let Some(c) = &dynamic.catalog {
        let secondaries: Vec<Name> = config
            .settings
            .secondary_zones
            .iter()
            .map(|z| z.zone.clone())
            .collect();
        c.set_secondaries(&secondaries);
    }
    if let Some(f) = &dynamic.following {
        f.refresh_policy(&[]);
    }
    let takes_updates = |z: &ZoneConfig| {
        let files = dynamic.files.as_ref();
        files.is_some_and(|f| f.takes(&LowerName::new(&z.origin_name())))
    };
    let plain: Vec<ZoneConfig> = config
        .zones
        .iter()
        .filter(|z| !takes_updates(z))
        .cloned()
        .collect();
    let (zones, failed) = load_zones(&plain);
    for (origin, e) in &failed {
        error!(zone = %origin, "reload: {e}; keeping the previous version");
        log.record(origin, unix_secs(), Err(e.to_string()));
    }
    for z in &zones {
        record_loaded(log, z);
    }
    // Registry zones are the registry's; a reload leaves them alone (their
    // set changes with a restart).
    let mut configured = configured_origins(&config);
    configured.extend(old.registry_zone_names().map(|n| LowerName::new(&n)));
    if let Some(runtime) = &dynamic.runtime {
        configured.extend(runtime.names().iter().map(LowerName::new));
    }
    let removed: Vec<Name> = store
        .snapshot()
        .zones()
        .filter(|z| !configured.contains(z.origin_key()))
        .map(|z| z.origin().clone())
        .collect();
    let running = router.handler.load();
    router
        .handler
        .store(Arc::new(handler_for(&config, Some(&running))));
    // Rotation first: a zone the reload changes is then committed once,
    // already rotating as configured.
    store.set_rotation(config.reloaded_rotation(old));
    let before: Vec<Arc<Zone>> = store.snapshot().zones().cloned().collect();
    // The catalog changes in the same commit as the zones it lists.
    let mut zones = zones;
    if let Some(c) = &dynamic.catalog {
        let added: Vec<Name> = zones.iter().map(|z| z.origin().clone()).collect();
        zones.push(c.for_zones(&store.snapshot(), added.iter(), &removed));
    }
    let diffs = store.replace_zones(zones, &removed, unix_secs());
    free_here(before);
    crate::memory::release_freed();
    for d in &diffs {
        info!(zone = %d.origin, old_serial = d.old_serial, new_serial = d.new_serial,
              removed = d.removed.len(), added = d.added.len(), "zone changed");
    }
    if let Some(files) = &dynamic.files {
        let _ = load_dynamic(files, store, log, false);
    }
    info!(changed = diffs.len(), failed = failed.len(), "reload done");
    Some(config)
}
