//! dnstap sampling: an outcome drawn for sampling has its frame as
//! received and its frame as sent written to `TAP_RING`, for the
//! controller to turn into dnstap messages. The copies are global
//! functions (verified once, on their own) called only for the sampled
//! few. The draw is a per-CPU countdown; a random number is drawn only
//! for a sample (a helper call per answer cost a tenth of a hit), and
//! nothing at all is done while sampling is off.

use aya_ebpf::bindings::xdp_md;
use aya_ebpf::helpers::{bpf_get_prandom_u32, bpf_ktime_get_ns, bpf_xdp_load_bytes};
use aya_ebpf::programs::XdpContext;
use aya_ebpf::bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP};
use xdpdns_common::tap::{kind, skip_after_sample, TapRecord, QUERY_MAX, RESPONSE_MAX, RING_BYTES};
use xdpdns_common::{counter, PassReason, XdpConfig};

use crate::maps::{count, CONFIG, SCRATCH, TAP_RECORD, TAP_RING};

/// Whether this outcome of `kind` is sampled: each kind counts down the
/// outcomes to skip (per CPU); at zero it is sampled and a new random
/// gap drawn.
#[inline(always)]
pub fn draw(skips: &mut [u32; kind::COUNT], cfg: *const XdpConfig, kind: u32) -> bool {
    let every = unsafe { (*cfg).tap_every.get(kind as usize).copied() }.unwrap_or(0);
    if every == 0 {
        return false;
    }
    let Some(left) = skips.get_mut(kind as usize) else {
        return false;
    };
    if *left > 0 {
        *left -= 1;
        return false;
    }
    *left = skip_after_sample(every, unsafe { bpf_get_prandom_u32() });
    true
}

/// Samples a DNS query passed up for `reason`, at the rate configured.
#[inline(always)]
pub fn passed(ctx: *mut xdp_md, reason: PassReason) {
    if reason == PassReason::NotDns {
        return;
    }
    let (Some(cfg), Some(s)) = (CONFIG.get_ptr(0), SCRATCH.get_ptr_mut(0)) else {
        return;
    };
    if draw(unsafe { &mut (*s).tap_skip }, cfg, kind::PASSED) {
        xdpdns_tap_query(ctx);
        xdpdns_tap_send(ctx, kind::PASSED, reason as u32, 0);
    }
}

/// Keeps the frame as received: called before the reply overwrites it.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_tap_query(ctx: *mut xdp_md) -> u32 {
    let Some(r) = TAP_RECORD.get_ptr_mut(0) else {
        return 0;
    };
    let len = frame_len(ctx);
    let r = unsafe { &mut *r };
    r.query_len = len;
    r.response_len = 0;
    copy(ctx, len, r.query.as_mut_ptr(), QUERY_MAX)
}

/// Sends the sample of `kind` with `detail`: with the frame as it is now
/// when `sent` is not 0.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_tap_send(ctx: *mut xdp_md, kind: u32, detail: u32, sent: u32) -> u32 {
    let Some(r) = TAP_RECORD.get_ptr_mut(0) else {
        return 0;
    };
    let r = unsafe { &mut *r };
    r.time_ns = unsafe { bpf_ktime_get_ns() };
    r.kind = kind;
    r.detail = detail;
    if sent != 0 {
        let len = frame_len(ctx);
        r.response_len = len;
        copy(ctx, len, r.response.as_mut_ptr(), RESPONSE_MAX);
    }
    // The reader is woken only once a quarter of the ring is waiting (it
    // also reads on a timer): one wake-up per sample cost the server more
    // than the samples under a flood.
    let waiting = TAP_RING.query(BPF_RB_AVAIL_DATA as u64);
    let wake = match waiting >= u64::from(RING_BYTES / 4) {
        true => BPF_RB_FORCE_WAKEUP,
        false => BPF_RB_NO_WAKEUP,
    };
    match TAP_RING.output::<TapRecord>(&*r, wake as u64) {
        Ok(()) => count(counter::TAP_SAMPLED),
        Err(_) => count(counter::TAP_LOST),
    }
    0
}

#[inline(always)]
fn frame_len(ctx: *mut xdp_md) -> u32 {
    let ctx = XdpContext::new(ctx);
    (ctx.data_end() - ctx.data()) as u32
}

/// Copies the frame's first `len` bytes, at most `cap`, to `to`.
#[inline(always)]
fn copy(ctx: *mut xdp_md, len: u32, to: *mut u8, cap: usize) -> u32 {
    let n = if len as usize > cap { cap as u32 } else { len };
    // Bounded again on a value the optimiser cannot see through, so the
    // verifier gets the bound on the register the helper is given.
    let n = crate::verifier::opaque(n) & (2 * cap as u32 - 1);
    if n == 0 || n as usize > cap {
        return 0;
    }
    unsafe { bpf_xdp_load_bytes(ctx, 0, to.cast(), n) };
    n
}
