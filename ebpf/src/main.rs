//! xdpdns XDP program: answers UDP A/AAAA queries for names in the answer
//! table with XDP_TX; passes everything else up, unchanged, to the
//! fallback server. The conditions are those of SPEC §4.
#![no_std]
#![no_main]

#[cfg(feature = "bench")]
mod bench;
mod csum;
mod headers;
mod maps;
mod question;
mod reply;

use aya_ebpf::bindings::xdp_action::{XDP_PASS, XDP_TX};
use aya_ebpf::macros::xdp;
use aya_ebpf::programs::XdpContext;
use xdpdns_common::{counter, PassReason, SHORT_NAME_MAX};

use maps::{CONFIG, COUNTERS, LONG_NAMES, SCRATCH, SHORT_NAMES};

#[xdp]
pub fn xdpdns(ctx: XdpContext) -> u32 {
    handle(&ctx)
}

/// The whole decision for one frame: answer (XDP_TX) or pass it up.
#[inline(always)]
pub fn handle(ctx: &XdpContext) -> u32 {
    match try_answer(ctx) {
        Ok(slot) => {
            count(counter::ANSWERED_A + slot as u32);
            XDP_TX
        }
        Err(reason) => {
            count(counter::PASS_BASE + reason as u32);
            XDP_PASS
        }
    }
}

/// Passes everything. Attached to the peer of a veth pair, it makes the
/// kernel deliver XDP_TX frames in native mode (see TOOLCHAIN.md).
#[xdp]
pub fn xdp_pass(_ctx: XdpContext) -> u32 {
    XDP_PASS
}

#[inline(always)]
fn count(slot: u32) {
    if let Some(c) = COUNTERS.get_ptr_mut(slot) {
        unsafe { *c += 1 };
    }
}

#[inline(always)]
fn try_answer(ctx: &XdpContext) -> Result<u8, PassReason> {
    let cfg = *CONFIG.get(0).ok_or(PassReason::NotDns)?;
    let pkt = headers::parse(ctx, cfg.port)?;
    let s = unsafe { &mut *SCRATCH.get_ptr_mut(0).ok_or(PassReason::ParseError)? };
    let qn = question::parse(ctx, &pkt, s)?;
    let generation = cfg.generation as u8;
    question::finish_keys(s, qn.qtype, generation);
    let answer = if qn.name_len as usize <= SHORT_NAME_MAX {
        unsafe { SHORT_NAMES.get(&s.short) }
    } else {
        unsafe { LONG_NAMES.get(&s.long) }
    };
    let answer = answer.ok_or(PassReason::Miss)?;
    reply::build(ctx, &pkt, &qn, answer, &cfg)?;
    Ok(qn.qtype)
}

/// Hides a value from the optimiser so a bounds check written after it is
/// kept and seen by the verifier on the register that is used.
#[inline(always)]
pub fn opaque(v: u32) -> u32 {
    unsafe { core::ptr::read_volatile(&v) }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
