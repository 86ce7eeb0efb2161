//! How entries are laid out for the kernel: which name table a key goes
//! to, its key bytes in that table, and the bytes of a key or value.

use xdpdns_common::{
    key_lead, key_tail, LongKey, ShortKey, TinyKey, LONG_NAME_BUF, SHORT_NAME_MAX, TINY_NAME_MAX,
};

use crate::answers::compile::EntryKey;

pub(super) enum Split {
    Tiny(TinyKey),
    Short(ShortKey),
    Long(Box<LongKey>),
}

/// The name table an entry goes to: 0 tiny, 1 short, 2 long.
pub(super) fn table_of(key: &EntryKey) -> usize {
    match key.name.len() {
        n if n <= TINY_NAME_MAX => 0,
        n if n <= SHORT_NAME_MAX => 1,
        _ => 2,
    }
}

/// The kernel key layout for an entry in `layer` (the compiler
/// guarantees ≤ 255 bytes).
pub(super) fn split_key(key: &EntryKey, layer: u8) -> Split {
    let name = &key.name;
    let lead = key_lead(name[0], key.qtype, layer);
    let fill = |buf: &mut [u8]| {
        buf[..name.len()].copy_from_slice(name);
        buf[0] = lead;
        // Zero in every plain key (root label or padding), one for a
        // signed variant.
        let last = buf.len() - 1;
        buf[last] |= key_tail(key.qtype);
    };
    if name.len() <= TINY_NAME_MAX {
        let mut k = TinyKey {
            name: [0; TINY_NAME_MAX],
        };
        fill(&mut k.name);
        Split::Tiny(k)
    } else if name.len() <= SHORT_NAME_MAX {
        let mut k = ShortKey {
            name: [0; SHORT_NAME_MAX],
        };
        fill(&mut k.name);
        Split::Short(k)
    } else {
        let mut k = Box::new(LongKey {
            name: [0; LONG_NAME_BUF],
        });
        fill(&mut k.name);
        Split::Long(k)
    }
}

/// The bytes of a map key or value (plain `repr(C)` data without padding
/// the kernel would read).
pub(super) fn bytes_of<T: aya::Pod>(v: &T) -> &[u8] {
    // SAFETY: `Pod` types are plain data; the slice covers exactly `v`.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdpdns_common::{layer, qtype_slot};

    fn key(name: &[u8], qtype: u8) -> EntryKey {
        EntryKey {
            name: name.into(),
            qtype,
        }
    }

    /// `www.example.` in wire form.
    const WWW: &[u8] = b"\x03www\x07example\x00";

    #[test]
    fn keys_go_to_the_table_of_their_length_with_lead_and_tail_bytes() {
        let Split::Tiny(k) = split_key(&key(WWW, qtype_slot::A), 1) else {
            panic!("a 17-byte name is tiny");
        };
        assert_eq!(k.name[0], key_lead(3, qtype_slot::A, 1));
        assert_eq!(&k.name[1..WWW.len()], &WWW[1..]);
        let padding = &k.name[WWW.len()..TINY_NAME_MAX - 1];
        assert!(padding.iter().all(|&b| b == 0), "zero-padded");
        assert_eq!(k.name[TINY_NAME_MAX - 1], 1, "A's tail: its type");
        let Split::Tiny(signed) = split_key(&key(WWW, qtype_slot::A_SIGNED), 0) else {
            panic!("tiny");
        };
        assert_eq!(
            signed.name[TINY_NAME_MAX - 1],
            1,
            "the signed variant's tail"
        );
        assert_eq!(signed.name[0] & 0x80, 0x80, "and its lead");
        let Split::Tiny(srv) = split_key(&key(WWW, qtype_slot::of(33)), 0) else {
            panic!("tiny");
        };
        assert_eq!(srv.name[TINY_NAME_MAX - 1], 33, "SRV's tail");
        // One label of `len - 2` bytes: a wire name of `len` bytes.
        let name_of = |len: usize| {
            let mut n = vec![(len - 2) as u8];
            n.extend(std::iter::repeat_n(b'a', len - 2));
            n.push(0);
            n
        };
        let at = |len| split_key(&key(&name_of(len), qtype_slot::AAAA), 0);
        assert!(matches!(at(TINY_NAME_MAX), Split::Tiny(_)));
        assert!(matches!(at(TINY_NAME_MAX + 1), Split::Short(_)));
        assert!(matches!(at(SHORT_NAME_MAX), Split::Short(_)));
        assert!(matches!(at(SHORT_NAME_MAX + 1), Split::Long(_)));
    }

    #[test]
    fn layers_and_types_never_share_a_key() {
        let bytes = |s: Split| match s {
            Split::Tiny(k) => k.name.to_vec(),
            Split::Short(k) => k.name.to_vec(),
            Split::Long(k) => k.name.to_vec(),
        };
        let mut seen = std::collections::HashSet::new();
        for qtype in qtype_slot::all() {
            for layer in [layer::BASE, layer::OVERLAY] {
                assert!(seen.insert(bytes(split_key(&key(WWW, qtype), layer))));
            }
        }
    }
}
