//! Programs for timing the answer path with BPF_PROG_TEST_RUN (never
//! attached). With `repeat > 1` the kernel reuses one buffer, so after the
//! first run the frame is already a reply; each program therefore first
//! restores the saved query frame (TOOLCHAIN.md), and the cost of that
//! restore is measured alone and subtracted.

use aya_ebpf::bindings::xdp_action::{XDP_ABORTED, XDP_PASS, XDP_TX};
use aya_ebpf::helpers::{bpf_xdp_adjust_tail, bpf_xdp_store_bytes};
use aya_ebpf::macros::{map, xdp};
use aya_ebpf::maps::PerCpuArray;
use aya_ebpf::programs::XdpContext;

use xdpdns_common::{BenchFrame, BENCH_FRAME_MAX};

#[map(name = "BENCH_FRAME")]
static BENCH_FRAME: PerCpuArray<BenchFrame> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn restore(ctx: &XdpContext) -> bool {
    let Some(f) = BENCH_FRAME.get_ptr(0) else {
        return false;
    };
    let f = unsafe { &*f };
    let len = crate::verifier::opaque(f.len) & (BENCH_FRAME_MAX as u32 - 1);
    if len < 14 {
        return false;
    }
    let cur = (ctx.data_end() - ctx.data()) as i32;
    let delta = len as i32 - cur;
    if delta != 0 && unsafe { bpf_xdp_adjust_tail(ctx.ctx, delta) } != 0 {
        return false;
    }
    unsafe { bpf_xdp_store_bytes(ctx.ctx, 0, f.data.as_ptr() as *mut _, len) == 0 }
}

/// Restore only: the baseline subtracted from the others.
#[xdp]
pub fn bench_restore(ctx: XdpContext) -> u32 {
    if restore(&ctx) {
        XDP_TX
    } else {
        XDP_ABORTED
    }
}

/// Restore, then the real program.
#[xdp]
pub fn bench_answer(ctx: XdpContext) -> u32 {
    if !restore(&ctx) {
        return XDP_ABORTED;
    }
    crate::handle(&ctx)
}

/// Restore, then the parse alone (`xdpdns_parse`): the first step of the
/// cost breakdown.
#[xdp]
pub fn bench_parse(ctx: XdpContext) -> u32 {
    if !restore(&ctx) {
        return XDP_ABORTED;
    }
    let (Some(cfg), Some(s)) = (
        crate::maps::CONFIG.get_ptr(0),
        crate::maps::SCRATCH.get_ptr_mut(0),
    ) else {
        return XDP_ABORTED;
    };
    match crate::xdpdns_parse(ctx.ctx, s, cfg) {
        0 => XDP_PASS,
        _ => XDP_ABORTED,
    }
}

/// Restore, parse and look up (the reply not built): the second step.
#[xdp]
pub fn bench_lookup(ctx: XdpContext) -> u32 {
    if !restore(&ctx) {
        return XDP_ABORTED;
    }
    match crate::parse_and_lookup(&ctx) {
        Ok(_) => XDP_PASS,
        Err(_) => XDP_ABORTED,
    }
}

/// Restore, then grow the frame by 64 bytes at the tail: what
/// `bpf_xdp_adjust_tail` costs on its own.
#[xdp]
pub fn bench_grow(ctx: XdpContext) -> u32 {
    if !restore(&ctx) {
        return XDP_ABORTED;
    }
    if unsafe { bpf_xdp_adjust_tail(ctx.ctx, 64) } != 0 {
        return XDP_ABORTED;
    }
    XDP_TX
}

/// Restore, then the floor.
#[xdp]
pub fn bench_reflect(ctx: XdpContext) -> u32 {
    if !restore(&ctx) {
        return XDP_ABORTED;
    }
    reflect(&ctx)
}

/// The floor any in-kernel responder pays, attachable for the end-to-end
/// benchmark: an IPv4 UDP packet to port 53 goes back with MACs, addresses
/// and ports swapped and QR set (UDP checksum zeroed, which IPv4 allows),
/// by direct packet access. No parsing beyond that, no lookup, no answer.
#[xdp]
pub fn xdp_reflect(ctx: XdpContext) -> u32 {
    reflect(&ctx)
}

#[inline(always)]
fn reflect(ctx: &XdpContext) -> u32 {
    let Ok(h) = crate::headers::load::<{ 14 + 20 + 8 + 12 }>(ctx, 0) else {
        return XDP_PASS;
    };
    if h[12] != 0x08 || h[13] != 0 || h[14] != 0x45 || h[23] != 17 || h[36] != 0 || h[37] != 53 {
        return XDP_PASS;
    }
    let mut out = h;
    out[0..6].copy_from_slice(&h[6..12]);
    out[6..12].copy_from_slice(&h[0..6]);
    out[26..30].copy_from_slice(&h[30..34]);
    out[30..34].copy_from_slice(&h[26..30]);
    out[34..36].copy_from_slice(&h[36..38]);
    out[36..38].copy_from_slice(&h[34..36]);
    out[40] = 0;
    out[41] = 0;
    out[44] |= 0x80;
    let _ = crate::headers::store(ctx, 0, &out);
    XDP_TX
}
