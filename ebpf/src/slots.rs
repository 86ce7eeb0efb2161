//! The tiny-name slot table's probe (its layout, and why the controller
//! never changes a slot a packet may be reading: `xdpdns_common::slots`).

use xdpdns_common::slots::{buckets_of, hash, BUCKET, IN_USE};

use crate::maps::{Scratch, CONFIG, TINY_SLOTS};

/// [`xdpdns_tiny_slot`]'s answer when the key is in no slot but may be
/// in the overflow hash map.
pub const IN_OVERFLOW: u32 = u32::MAX;

/// Where the base key in the tiny key buffer is: its slot plus one, 0
/// when it is nowhere, [`IN_OVERFLOW`] when the overflow map is to be
/// asked. Eight key comparisons at most, in two buckets.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_tiny_slot(s: *mut Scratch) -> u32 {
    let Some(s) = (unsafe { s.as_ref() }) else {
        return 0;
    };
    let Some(cfg) = CONFIG.get(0) else {
        return 0;
    };
    let (buckets, overflow) = (cfg.tiny_buckets, cfg.tiny_overflow);
    let missing = match overflow {
        0 => 0,
        _ => IN_OVERFLOW,
    };
    if buckets < 2 {
        return missing;
    }
    let p = s.tiny.key.name.as_ptr() as *const u64;
    let w = unsafe { [p.read(), p.add(1).read(), p.add(2).read(), p.add(3).read()] };
    let (first, second) = buckets_of(hash(w), buckets);
    let lead = w[0] | IN_USE as u64;
    for bucket in [first, second] {
        for i in 0..BUCKET as u32 {
            let at = bucket * BUCKET as u32 + i;
            let Some(slot) = TINY_SLOTS.get(at) else {
                return missing;
            };
            // The first word (with the in-use mark) first: a slot being
            // given a key is marked last.
            let k = slot.key.name.as_ptr() as *const u64;
            let k = unsafe {
                [
                    k.read_volatile(),
                    k.add(1).read_volatile(),
                    k.add(2).read_volatile(),
                    k.add(3).read_volatile(),
                ]
            };
            if k[0] == lead && k[1] == w[1] && k[2] == w[2] && k[3] == w[3] {
                return at + 1;
            }
        }
    }
    missing
}
