//! Block ids for answer sections too large to inline in a table entry:
//! one id per distinct section, counted by the entries that reference it,
//! and reused only after the loader has deleted the block from the kernel
//! (which it does after an RCU grace period, so no packet still reads it).

use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Default)]
pub(super) struct BlockIds {
    by_content: HashMap<Arc<[u8]>, (u32, usize)>,
    free: Vec<u32>,
    next: u32,
}

impl BlockIds {
    /// Takes a reference to `content`: its id, and whether the block is
    /// new (the loader writes it before any entry points at it).
    pub(super) fn acquire(&mut self, content: &Arc<[u8]>) -> (u32, bool) {
        if let Some((id, refs)) = self.by_content.get_mut(content) {
            *refs += 1;
            return (*id, false);
        }
        let id = self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next
        });
        self.by_content.insert(content.clone(), (id, 1));
        (id, true)
    }

    /// Drops a reference to `content`; the id when it was the last one
    /// (the loader deletes the block, then calls [`recycle`](Self::recycle)).
    pub(super) fn release(&mut self, content: &[u8]) -> Option<u32> {
        let (id, refs) = self.by_content.get_mut(content)?;
        *refs -= 1;
        if *refs > 0 {
            return None;
        }
        let id = *id;
        self.by_content.remove(content);
        Some(id)
    }

    /// Makes a released id available again once its block is gone.
    pub(super) fn recycle(&mut self, id: u32) {
        self.free.push(id);
    }

    pub(super) fn id(&self, content: &[u8]) -> Option<u32> {
        self.by_content.get(content).map(|(id, _)| *id)
    }

    pub(super) fn len(&self) -> usize {
        self.by_content.len()
    }

    pub(super) fn clear(&mut self) {
        *self = BlockIds::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_sections_share_an_id_until_the_last_reference_goes() {
        let mut b = BlockIds::default();
        let x: Arc<[u8]> = Arc::from(vec![1u8; 64]);
        let y: Arc<[u8]> = Arc::from(vec![2u8; 64]);
        let (ix, new) = b.acquire(&x);
        assert!(new);
        assert_eq!(
            b.acquire(&Arc::from(vec![1u8; 64])),
            (ix, false),
            "by content"
        );
        let (iy, new) = b.acquire(&y);
        assert!(new && iy != ix);
        assert_eq!(b.release(&x), None, "one reference left");
        assert_eq!(b.release(&x), Some(ix));
        assert_eq!(b.id(&x), None);
        // Not reused before the loader says the block is gone.
        let (iz, _) = b.acquire(&Arc::from(vec![3u8; 64]));
        assert!(iz != ix && iz != iy);
        b.recycle(ix);
        assert_eq!(b.acquire(&Arc::from(vec![4u8; 64])).0, ix);
    }
}
