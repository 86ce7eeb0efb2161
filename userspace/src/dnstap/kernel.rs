//! The kernel's samples: one task reads the ring buffer the XDP program
//! writes them to (woken by epoll), turns each into its dnstap events
//! and hands them to the [`Tap`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use aya::maps::{MapData, RingBuf};
use tokio::io::unix::AsyncFd;
use tracing::warn;
use xdpdns_core::dnstap::packet::sample_events;
use xdpdns_core::dnstap::WallTime;

use super::{wall_now, Tap};

/// How often the ring is read besides the kernel's wake-ups.
const READ_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// CLOCK_MONOTONIC in nanoseconds: what `bpf_ktime_get_ns` reads.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: one timespec on the stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The wall time of monotonic `ns`, given both clocks read together.
fn to_wall(ns: u64, mono_now: u64, wall: WallTime) -> WallTime {
    let wall_ns = u128::from(wall.secs) * 1_000_000_000 + u128::from(wall.nanos);
    let at = wall_ns.saturating_sub(u128::from(mono_now.saturating_sub(ns)));
    WallTime {
        secs: (at / 1_000_000_000) as u64,
        nanos: (at % 1_000_000_000) as u32,
    }
}

/// Reads `ring` until the process ends.
pub fn start(ring: RingBuf<MapData>, tap: Arc<Tap>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // SAFETY: the ring buffer owns its fd, which lives as long as the
        // AsyncFd holding it.
        let mut fd = match unsafe { AsyncFd::register(ring) } {
            Ok(fd) => fd,
            Err(e) => {
                warn!("dnstap: cannot poll the kernel's sample ring: {e}; no kernel samples");
                return;
            }
        };
        // The kernel wakes this task only when a quarter of the ring is
        // waiting; the rest is read on this beat.
        let mut beat = tokio::time::interval(READ_EVERY);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Readiness cleared before reading: what arrives meanwhile
            // wakes the task again.
            tokio::select! {
                ready = fd.readable_mut() => match ready {
                    Ok(mut g) => g.clear_ready(),
                    Err(_) => return,
                },
                _ = beat.tick() => {}
            }
            let (mono, wall) = (monotonic_ns(), wall_now());
            let ring = fd.get_mut();
            let mut batch = Vec::new();
            while let Some(item) = ring.next() {
                let Some((kind, query, response)) =
                    sample_events(&item, |ns| to_wall(ns, mono, wall))
                else {
                    continue;
                };
                if let Some(c) = tap.stats.kernel_samples.get(kind as usize) {
                    c.fetch_add(1, Ordering::Relaxed);
                }
                tap.kernel_sample(query, response, &mut batch);
            }
            tap.flush(&mut batch);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_times_become_wall_times() {
        let wall = WallTime {
            secs: 1_000,
            nanos: 200,
        };
        assert_eq!(
            to_wall(9_999_999_900, 10_000_000_000, wall),
            WallTime {
                secs: 1_000,
                nanos: 100
            }
        );
        assert_eq!(
            to_wall(8_000_000_000, 10_000_000_000, wall),
            WallTime {
                secs: 998,
                nanos: 200
            }
        );
    }
}
