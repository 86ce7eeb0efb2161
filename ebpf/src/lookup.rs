//! Looking a name up under a query-type slot: in the overlay generation
//! in force, then in the base (the tiny names' slots and their overflow,
//! or the hash map of the name's length).

use xdpdns_common::{
    key_lead, key_tail, layer, Answer, LONG_NAME_BUF, SHORT_NAME_MAX, TINY_NAME_MAX,
};

use crate::maps::{
    Scratch, LONG_NAMES, OVERLAY_LONG, OVERLAY_SHORT, OVERLAY_TINY, SHORT_NAMES, TINY_NAMES,
    TINY_SLOTS,
};

/// Looks up the name of `name_len` bytes held in its key buffer (by
/// `question::parse` or `negative`) under `slot`: in the overlay
/// generation `overlay` first when there is one (an absent marker there
/// hides the base's entry), then in the base.
#[inline(always)]
pub fn lookup(s: &mut Scratch, name_len: u32, slot: u8, overlay: u32) -> Option<&'static Answer> {
    if overlay != 0 {
        if let Some(a) = lookup_in(s, name_len, slot, overlay) {
            return if a.is_absent() { None } else { Some(a) };
        }
    }
    lookup_in(s, name_len, slot, 0)
}

/// [`lookup`] in one place: the base (`generation` 0) or an overlay
/// generation. Marks the key's lead and tail first.
#[inline(always)]
fn lookup_in(s: &mut Scratch, name_len: u32, slot: u8, generation: u32) -> Option<&'static Answer> {
    let tail = key_tail(slot);
    let layer = match generation {
        0 => layer::BASE,
        _ => layer::OVERLAY,
    };
    let generation = generation as u64;
    if name_len as usize <= TINY_NAME_MAX {
        s.tiny.key.name[0] = key_lead(s.tiny.key.name[0], slot, layer);
        s.tiny.key.name[TINY_NAME_MAX - 1] = tail;
        s.tiny.generation = generation;
        match generation {
            0 => match crate::slots::xdpdns_tiny_slot(s) {
                0 => None,
                crate::slots::IN_OVERFLOW => unsafe { TINY_NAMES.get(&s.tiny.key) },
                // An entry deleted in place keeps its slot, absent.
                at => TINY_SLOTS
                    .get(at - 1)
                    .map(|slot| &slot.answer)
                    .filter(|a| !a.is_absent()),
            },
            _ => unsafe { OVERLAY_TINY.get(&s.tiny) },
        }
    } else if name_len as usize <= SHORT_NAME_MAX {
        s.short.key.name[0] = key_lead(s.short.key.name[0], slot, layer);
        s.short.key.name[SHORT_NAME_MAX - 1] = tail;
        s.short.generation = generation;
        match generation {
            0 => unsafe { SHORT_NAMES.get(&s.short.key) },
            _ => unsafe { OVERLAY_SHORT.get(&s.short) },
        }
    } else {
        s.long.key.name[0] = key_lead(s.long.key.name[0], slot, layer);
        s.long.key.name[LONG_NAME_BUF - 1] = tail;
        s.long.generation = generation;
        match generation {
            0 => unsafe { LONG_NAMES.get(&s.long.key) },
            _ => unsafe { OVERLAY_LONG.get(&s.long) },
        }
    }
}

