//! RCU grace periods waited for off the writer's path: the writer asks
//! for one when it makes an overlay generation unreachable and goes on;
//! a thread of its own waits for them, one after another, and says which
//! have passed. What the writer removes (older generations, changed base
//! entries, blocks) waits for a grace period that began after the flip
//! that made it unreachable.

use std::sync::{Arc, Condvar, Mutex};

use super::sys::GracePeriod;

#[derive(Default)]
struct Epochs {
    /// The newest epoch asked for.
    requested: u64,
    /// Every epoch up to this one has passed: a whole grace period began
    /// after it was asked for and ended.
    passed: u64,
    /// The waiting thread failed (no grace period can be vouched for).
    failed: bool,
    stop: bool,
}

struct Shared {
    epochs: Mutex<Epochs>,
    changed: Condvar,
}

/// The grace-period clock: [`GraceClock::request`] returns an epoch,
/// [`GraceClock::passed`] says whether it has passed.
pub(super) struct GraceClock {
    shared: Arc<Shared>,
}

impl GraceClock {
    pub(super) fn start() -> std::io::Result<GraceClock> {
        let grace = GracePeriod::new()?;
        let shared = Arc::new(Shared {
            epochs: Mutex::default(),
            changed: Condvar::new(),
        });
        let worker = shared.clone();
        std::thread::Builder::new()
            .name("xdp-grace".into())
            .spawn(move || run(grace, worker))?;
        Ok(GraceClock { shared })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Epochs> {
        self.shared.epochs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks for a grace period that begins from now; its epoch.
    pub(super) fn request(&self) -> u64 {
        let mut e = self.lock();
        e.requested += 1;
        let epoch = e.requested;
        drop(e);
        self.shared.changed.notify_all();
        epoch
    }

    /// Whether a whole grace period has passed since `epoch` was asked.
    pub(super) fn passed(&self, epoch: u64) -> bool {
        self.lock().passed >= epoch
    }

    /// Blocks until `epoch` has passed; an error when the clock failed.
    pub(super) fn wait(&self, epoch: u64) -> std::io::Result<()> {
        let mut e = self.lock();
        while e.passed < epoch {
            if e.failed {
                return Err(std::io::Error::other("the grace-period thread failed"));
            }
            e = self
                .shared
                .changed
                .wait(e)
                .unwrap_or_else(|p| p.into_inner());
        }
        Ok(())
    }

    /// Asks for a grace period and waits for it.
    pub(super) fn sync(&self) -> std::io::Result<()> {
        let epoch = self.request();
        self.wait(epoch)
    }
}

impl Drop for GraceClock {
    fn drop(&mut self) {
        self.lock().stop = true;
        self.shared.changed.notify_all();
    }
}

fn run(grace: GracePeriod, shared: Arc<Shared>) {
    loop {
        let target = {
            let mut e = shared.epochs.lock().unwrap_or_else(|p| p.into_inner());
            while e.requested == e.passed && !e.stop {
                e = shared.changed.wait(e).unwrap_or_else(|p| p.into_inner());
            }
            if e.stop {
                return;
            }
            // Every request so far was made before this grace period
            // begins.
            e.requested
        };
        let ok = grace.wait().is_ok();
        let mut e = shared.epochs.lock().unwrap_or_else(|p| p.into_inner());
        match ok {
            true => e.passed = target,
            false => e.failed = true,
        }
        drop(e);
        shared.changed.notify_all();
        if !ok {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_pass_in_order_and_waits_return() {
        // Creating the maps needs root (as every XDP test does).
        let Ok(clock) = GraceClock::start() else {
            assert!(unsafe { libc::geteuid() } != 0, "root can create BPF maps");
            return;
        };
        let a = clock.request();
        let b = clock.request();
        assert!(b > a);
        clock.wait(b).unwrap();
        assert!(clock.passed(a) && clock.passed(b));
        let c = clock.request();
        clock.wait(c).unwrap();
        assert!(clock.passed(c));
    }
}
