//! Short byte strings without an allocation of their own.

/// Bytes inline up to [`INLINE`], on the heap beyond, in 24 bytes. Most
/// of a large zone's RRsets (an A, AAAA or short TXT set packs in 8 to
/// 20 bytes) and most names relative to their zone fit inline, where a
/// boxed slice cost a 32-byte allocation for the 8 bytes of an A set.
#[derive(Clone)]
pub(crate) enum InlineBytes {
    Inline { len: u8, data: [u8; INLINE] },
    Heap(Box<[u8]>),
}

const INLINE: usize = 22;
const _: () = assert!(std::mem::size_of::<InlineBytes>() == 24);

impl InlineBytes {
    pub(crate) fn from_slice(bytes: &[u8]) -> InlineBytes {
        match bytes.len() {
            0..=INLINE => InlineBytes::inline(bytes),
            _ => InlineBytes::Heap(bytes.into()),
        }
    }

    pub(crate) fn from_vec(bytes: Vec<u8>) -> InlineBytes {
        match bytes.len() {
            0..=INLINE => InlineBytes::inline(&bytes),
            _ => InlineBytes::Heap(bytes.into_boxed_slice()),
        }
    }

    fn inline(bytes: &[u8]) -> InlineBytes {
        let mut data = [0; INLINE];
        data[..bytes.len()].copy_from_slice(bytes);
        InlineBytes::Inline {
            len: bytes.len() as u8,
            data,
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            InlineBytes::Inline { len, data } => &data[..*len as usize],
            InlineBytes::Heap(b) => b,
        }
    }
}

impl Default for InlineBytes {
    fn default() -> InlineBytes {
        InlineBytes::Inline {
            len: 0,
            data: [0; INLINE],
        }
    }
}

impl PartialEq for InlineBytes {
    fn eq(&self, other: &InlineBytes) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for InlineBytes {}

impl std::hash::Hash for InlineBytes {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl std::fmt::Debug for InlineBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_slice())
    }
}
