//! Response rate limiting of the kernel's answers: the algorithm of
//! `xdpdns_common::rrl`, which the fallback runs too, over a bucket array
//! shared by every CPU.

use aya_ebpf::helpers::bpf_ktime_get_coarse_ns;
use xdpdns_common::counter;
use xdpdns_common::rrl::{account, Verdict};
use xdpdns_common::XdpConfig;

use crate::maps::{Scratch, RRL_BUCKETS};

/// The verdict on the answer of `class` that `s` holds the query of, as
/// 0 (send), 1 (slip) or 2 (drop). Called after `xdpdns_build_opt`, which
/// judged the server cookie. A global function: the caller's verifier
/// paths do not multiply by the limiter's.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_rrl(s: *const Scratch, cfg: *const XdpConfig, class: u32) -> u32 {
    let (Some(s), Some(cfg)) = (unsafe { s.as_ref() }, unsafe { cfg.as_ref() }) else {
        return 0;
    };
    match judge(s, cfg, class as u8) {
        Verdict::Send => 0,
        Verdict::Slip => 1,
        Verdict::Drop => 2,
    }
}

#[inline(always)]
fn judge(s: &Scratch, cfg: &XdpConfig, class: u8) -> Verdict {
    let pkt = &s.pkt;
    let r = &cfg.rrl;
    if r.rate == 0 {
        return Verdict::Send;
    }
    if s.cookie_valid != 0 {
        crate::maps::count(counter::RRL_EXEMPT);
        return Verdict::Send;
    }
    // The source address of the query as received (the reply builder
    // swaps the headers later).
    let mut addr = [0u8; 16];
    if pkt.v6 {
        addr.copy_from_slice(&s.ip6[8..24]);
    } else {
        addr[..4].copy_from_slice(&s.ip4[12..16]);
    }
    let key = r.key(pkt.v6, &addr, class);
    let Some(bucket) = RRL_BUCKETS.get_ptr_mut(key.slot(r.slots)) else {
        return Verdict::Send;
    };
    let now_ms = match r.fixed_now_ms {
        0 => (unsafe { bpf_ktime_get_coarse_ns() } / 1_000_000) as u32,
        fixed => fixed,
    };
    let verdict = account(unsafe { &mut *bucket }, key, now_ms, r.rate, r.slip);
    match verdict {
        Verdict::Send => return verdict,
        Verdict::Slip => crate::maps::count(counter::RRL_SLIPPED),
        Verdict::Drop => crate::maps::count(counter::RRL_DROPPED),
    }
    crate::maps::count(counter::RRL_LIMITED);
    if r.log_only != 0 {
        return Verdict::Send;
    }
    verdict
}
