//! Names copied from the frame into the lookup key buffers: a suffix of
//! the query name (a closest encloser, an apex), lower-cased as the keys
//! are, optionally after the label of a gap entry's index.

use aya_ebpf::bindings::xdp_md;
use aya_ebpf::helpers::bpf_xdp_load_bytes;
use aya_ebpf::programs::XdpContext;
use xdpdns_common::{
    PassReason, LONG_NAME_BUF, MAX_NAME_WIRE_LEN, SHORT_NAME_MAX, TINY_NAME_MAX,
};

use crate::maps::Scratch;
use crate::question::lower8;

/// Copies the `len` bytes of the query name at frame offset `at` (a
/// suffix of it, at a label) into the key buffer for `shift` bytes more,
/// from byte `shift` on (0, or the label of a gap entry's index),
/// zero-padded, with one helper call, and lower-cases it as the keys
/// are. 0 on success.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_copy_suffix(
    ctx: *mut xdp_md,
    s: *mut Scratch,
    at: u32,
    len: u32,
    shift: u32,
) -> u32 {
    let Some(s) = (unsafe { s.as_mut() }) else {
        return 1;
    };
    let shift = crate::verifier::opaque(shift) & 3;
    let key_len = crate::verifier::opaque(len) + shift;
    let (base, words) = if key_len as usize <= TINY_NAME_MAX {
        (s.tiny.key.name.as_mut_ptr(), TINY_NAME_MAX / 8)
    } else if key_len as usize <= SHORT_NAME_MAX {
        (s.short.key.name.as_mut_ptr(), SHORT_NAME_MAX / 8)
    } else {
        (s.long.key.name.as_mut_ptr(), LONG_NAME_BUF / 8)
    };
    for w in 0..LONG_NAME_BUF / 8 {
        if w >= words {
            break;
        }
        unsafe { core::ptr::write_volatile((base as *mut u64).add(w), 0) };
    }
    // Bounded again on a value the optimiser cannot see through, so the
    // verifier gets the bound on the register the helper is given.
    let n = crate::verifier::opaque(len) & 0x1ff;
    if n == 0 || (n + shift) as usize > words * 8 || n as usize > MAX_NAME_WIRE_LEN {
        return 1;
    }
    let dst = unsafe { base.add(shift as usize) };
    let r = unsafe { bpf_xdp_load_bytes(ctx, at, dst as *mut core::ffi::c_void, n) };
    if r != 0 {
        return 1;
    }
    for w in 0..LONG_NAME_BUF / 8 {
        if w >= words || w * 8 >= (n + shift) as usize {
            break;
        }
        unsafe {
            let p = (base as *mut u64).add(w);
            core::ptr::write_volatile(p, lower8(core::ptr::read_volatile(p)));
        }
    }
    0
}

#[inline(always)]
pub(crate) fn copy_suffix(
    ctx: &XdpContext,
    s: &mut Scratch,
    at: u32,
    len: u32,
) -> Result<(), PassReason> {
    match xdpdns_copy_suffix(ctx.ctx, s, at, len, 0) {
        0 => Ok(()),
        _ => Err(PassReason::Miss),
    }
}
