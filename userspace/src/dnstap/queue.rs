//! The queue between those who tap and the writer: batches of events (a
//! UDP worker's batch of datagrams is one push, one wake-up of the
//! writer), bounded in events; a push that would go past the bound is
//! refused whole, and its events are counted as dropped by the caller.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use xdpdns_core::dnstap::Event;

#[derive(Clone)]
pub(super) struct Queue {
    tx: mpsc::UnboundedSender<Vec<Event>>,
    queued: Arc<AtomicUsize>,
    capacity: usize,
}

pub(super) struct QueueReader {
    rx: mpsc::UnboundedReceiver<Vec<Event>>,
    queued: Arc<AtomicUsize>,
}

/// A queue holding at most `capacity` events.
pub(super) fn queue(capacity: usize) -> (Queue, QueueReader) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let reader = QueueReader {
        rx,
        queued: queued.clone(),
    };
    (
        Queue {
            tx,
            queued,
            capacity,
        },
        reader,
    )
}

impl Queue {
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Queues `batch`, or gives back how many events were refused.
    pub(super) fn push(&self, batch: Vec<Event>) -> Result<(), usize> {
        let n = batch.len();
        if n == 0 {
            return Ok(());
        }
        if self.queued.fetch_add(n, Ordering::AcqRel) + n > self.capacity {
            self.queued.fetch_sub(n, Ordering::AcqRel);
            return Err(n);
        }
        self.tx.send(batch).map_err(|_| {
            self.queued.fetch_sub(n, Ordering::AcqRel);
            n
        })
    }
}

impl QueueReader {
    /// The next batch; `None` once every [`Queue`] is gone and the
    /// queue is empty.
    pub(super) async fn recv(&mut self) -> Option<Vec<Event>> {
        let b = self.rx.recv().await?;
        self.queued.fetch_sub(b.len(), Ordering::AcqRel);
        Some(b)
    }

    pub(super) fn try_recv(&mut self) -> Option<Vec<Event>> {
        let b = self.rx.try_recv().ok()?;
        self.queued.fetch_sub(b.len(), Ordering::AcqRel);
        Some(b)
    }

    /// Every sender is gone and nothing is left.
    pub(super) fn finished(&self) -> bool {
        self.rx.is_closed() && self.rx.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdpdns_core::dnstap::{Direction, Protocol, WallTime};

    fn events(n: usize) -> Vec<Event> {
        let e = Event {
            direction: Direction::Query,
            protocol: Protocol::Udp,
            client: "192.0.2.1:5353".parse().unwrap(),
            server: "192.0.2.53:53".parse().unwrap(),
            query_time: WallTime::default(),
            response_time: None,
            message: vec![0; 12],
            extra: None,
        };
        vec![e; n]
    }

    #[tokio::test]
    async fn bounded_in_events_not_batches() {
        let (q, mut r) = queue(5);
        assert_eq!(q.push(events(3)), Ok(()));
        assert_eq!(q.push(events(3)), Err(3), "past the bound: refused whole");
        assert_eq!(q.push(events(2)), Ok(()));
        assert_eq!(q.push(events(1)), Err(1));
        assert_eq!(r.recv().await.unwrap().len(), 3);
        assert_eq!(q.push(events(3)), Ok(()), "room again once read");
        assert_eq!(r.try_recv().unwrap().len(), 2);
        assert_eq!(r.try_recv().unwrap().len(), 3);
        assert!(r.try_recv().is_none());
        assert!(!r.finished());
        drop(q);
        assert!(r.finished());
    }
}
