//! dnstap out of both paths: the fallback's sockets hand their exchanges
//! to the [`Tap`], the kernel's samples come through its ring buffer
//! (`kernel`), and one writer task per target sends them to a Frame
//! Streams reader (`writer`). Serving never waits for it: the queue is
//! bounded and what does not fit is dropped and counted.

pub mod kernel;
mod queue;
mod target;
mod writer;

pub use target::{TapStats, TapStatus, Target};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use tracing::info;
use xdpdns_core::dnstap::{Direction, Event, Origin, Policy, Protocol, WallTime};

struct State {
    policy: Policy,
    /// `None`: dnstap off.
    queue: Option<queue::Queue>,
    target: Option<Target>,
}

/// The running tap, shared by every socket and the kernel's reader.
pub struct Tap {
    /// Whether the fallback taps anything: one load per message when off.
    fallback_on: AtomicBool,
    state: ArcSwap<State>,
    /// Fallback exchanges seen, for one-in-N sampling.
    seq: AtomicU64,
    pub stats: Arc<TapStats>,
}

impl Default for Tap {
    fn default() -> Self {
        Tap {
            fallback_on: AtomicBool::new(false),
            state: ArcSwap::from_pointee(State {
                policy: Policy::default(),
                queue: None,
                target: None,
            }),
            seq: AtomicU64::new(0),
            stats: Arc::default(),
        }
    }
}

/// The wall clock as dnstap wants it.
pub fn wall_now() -> WallTime {
    let d = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    WallTime {
        secs: d.as_secs(),
        nanos: d.subsec_nanos(),
    }
}

impl Tap {
    /// Applies `[dnstap]` (None: off): the policy at once; a new target
    /// gets a writer of its own (spawned on `runtime`), and the old
    /// writer ends once its queue is empty.
    pub fn configure(
        &self,
        settings: Option<(Target, Policy, usize)>,
        origin: Origin,
        runtime: &tokio::runtime::Handle,
    ) {
        let old = self.state.load();
        let Some((target, policy, capacity)) = settings else {
            if old.queue.is_some() {
                info!("dnstap off");
            }
            self.fallback_on.store(false, Ordering::Relaxed);
            self.state.store(Arc::new(State {
                policy: Policy::default(),
                queue: None,
                target: None,
            }));
            return;
        };
        let queue = match (&old.queue, old.target.as_ref() == Some(&target)) {
            (Some(q), true) if q.capacity() == capacity => q.clone(),
            _ => {
                let (tx, rx) = queue::queue(capacity);
                info!(%target, "dnstap on");
                runtime.spawn(writer::run(rx, target.clone(), origin, self.stats.clone()));
                tx
            }
        };
        self.fallback_on
            .store(policy.any_fallback(), Ordering::Relaxed);
        self.state.store(Arc::new(State {
            policy,
            queue: Some(queue),
            target: Some(target),
        }));
    }

    /// Where it writes and how it goes (`None`: dnstap off).
    pub fn status(&self) -> Option<TapStatus> {
        let target = self.state.load().target.clone()?;
        let s = &self.stats;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Some(TapStatus {
            target: target.to_string(),
            connected: s.connected.load(Ordering::Relaxed),
            written: get(&s.written),
            dropped: get(&s.dropped_queue) + get(&s.dropped_write),
            kernel_samples: s.kernel_samples.iter().map(get).sum(),
        })
    }

    /// Whether the fallback taps anything now.
    #[inline]
    pub fn fallback_on(&self) -> bool {
        self.fallback_on.load(Ordering::Relaxed)
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        self.state.load().policy.clone()
    }

    /// One exchange of the fallback: the query received at `query_time`
    /// and, when one was sent, its response, added to `batch` (sent by
    /// [`Tap::flush`]). False when it is not tapped (a transfer's later
    /// messages are then not either).
    #[allow(clippy::too_many_arguments)]
    pub fn exchange(
        &self,
        protocol: Protocol,
        client: SocketAddr,
        server: SocketAddr,
        query: &[u8],
        query_time: WallTime,
        response: Option<&[u8]>,
        batch: &mut Vec<Event>,
    ) -> bool {
        let state = self.state.load();
        let p = &state.policy;
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        if !p.fallback_sampled(seq) || !p.zone_matches(query) {
            return false;
        }
        let event = |direction, message: &[u8], response_time| Event {
            direction,
            protocol,
            client,
            server,
            query_time,
            response_time,
            message: message.to_vec(),
            extra: None,
        };
        if p.queries {
            batch.push(event(Direction::Query, query, None));
        }
        if let (true, Some(r)) = (p.responses, response) {
            batch.push(event(Direction::Response, r, Some(wall_now())));
        }
        true
    }

    /// Queues what `batch` gathered (one wake-up of the writer), or
    /// counts it dropped when the queue is full.
    pub fn flush(&self, batch: &mut Vec<Event>) {
        if batch.is_empty() {
            return;
        }
        let events = std::mem::take(batch);
        let state = self.state.load();
        let refused = match &state.queue {
            Some(q) => q.push(events).err().unwrap_or(0),
            None => 0,
        };
        if refused > 0 {
            self.stats
                .dropped_queue
                .fetch_add(refused as u64, Ordering::Relaxed);
        }
    }

    /// The responses of a transfer after its first (each message is one
    /// AUTH_RESPONSE).
    pub fn response(
        &self,
        protocol: Protocol,
        client: SocketAddr,
        server: SocketAddr,
        query_time: WallTime,
        message: &[u8],
    ) {
        if !self.state.load().policy.responses {
            return;
        }
        self.flush(&mut vec![Event {
            direction: Direction::Response,
            protocol,
            client,
            server,
            query_time,
            response_time: Some(wall_now()),
            message: message.to_vec(),
            extra: None,
        }]);
    }

    /// A kernel sample's events, filtered by zone, added to `batch`.
    pub(crate) fn kernel_sample(
        &self,
        query: Event,
        response: Option<Event>,
        batch: &mut Vec<Event>,
    ) {
        let state = self.state.load();
        let p = &state.policy;
        if !p.zone_matches(&query.message) {
            return;
        }
        if p.queries {
            batch.push(query);
        }
        if let (true, Some(r)) = (p.responses, response) {
            batch.push(r);
        }
    }
}
