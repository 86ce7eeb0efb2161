//! Values hidden from the optimiser, so that the verifier sees the bounds
//! checks written after them on the registers that are used, and does not
//! track every state a loop can end in.

use crate::maps::Scratch;

/// Hides a value from the optimiser so a bounds check written after it is
/// kept and seen by the verifier on the register that is used.
#[inline(always)]
pub fn opaque(v: u32) -> u32 {
    unsafe { core::ptr::read_volatile(&v) }
}

/// Passes `v` through map memory so the verifier sees an unknown value:
/// the label walk can end in up to 128 different states, and without this
/// every one of them would be verified through the rest of the program.
#[inline(always)]
pub fn launder(s: &mut Scratch, v: u32) -> u32 {
    unsafe {
        core::ptr::write_volatile(&mut s.launder, v);
        core::ptr::read_volatile(&s.launder)
    }
}
