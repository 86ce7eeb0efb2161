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

    /// Records a reference to `content` held in a kernel table adopted
    /// from a previous controller, under the id the kernel entry names.
    pub(super) fn adopt(&mut self, content: &Arc<[u8]>, id: u32) {
        let (_, refs) = self.by_content.entry(content.clone()).or_insert((id, 0));
        *refs += 1;
        self.next = self.next.max(id);
    }

    /// Ends an adoption: ids below the highest adopted one that no entry
    /// uses become free. Returns the ids among `in_kernel` (the block
    /// map's keys) no entry uses: blocks to delete before their id is
    /// reused (no packet can read them: no entry points at them).
    pub(super) fn finish_adoption(&mut self, in_kernel: Vec<u32>) -> Vec<u32> {
        let used: std::collections::HashSet<u32> =
            self.by_content.values().map(|(id, _)| *id).collect();
        self.next = in_kernel.iter().copied().fold(self.next, u32::max);
        self.free = (1..=self.next).filter(|id| !used.contains(id)).collect();
        in_kernel
            .into_iter()
            .filter(|id| !used.contains(id))
            .collect()
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

    #[test]
    fn an_adopted_table_keeps_its_ids_and_frees_the_rest() {
        let mut b = BlockIds::default();
        let x: Arc<[u8]> = Arc::from(vec![1u8; 64]);
        let y: Arc<[u8]> = Arc::from(vec![2u8; 64]);
        b.adopt(&x, 5);
        b.adopt(&x, 5);
        b.adopt(&y, 2);
        // Block 7 is in the kernel but no entry uses it.
        assert_eq!(b.finish_adoption(vec![2, 5, 7]), vec![7]);
        assert_eq!((b.id(&x), b.id(&y), b.len()), (Some(5), Some(2), 2));
        assert_eq!(b.release(&x), None, "two references were adopted");
        assert_eq!(b.release(&x), Some(5));
        // New sections get the free ids, never one still in use.
        let mut got: Vec<u32> = (0..6)
            .map(|i| b.acquire(&Arc::from(vec![10 + i; 64])).0)
            .collect();
        got.sort();
        assert_eq!(got, vec![1, 3, 4, 6, 7, 8]);
    }
}
