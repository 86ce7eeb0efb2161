//! xdpdns XDP program: answers UDP queries whose answer is in the answer
//! table (any type), and NXDOMAIN/NODATA from its existence entries, with
//! XDP_TX; passes everything else up, unchanged, to the
//! fallback server (docs/src/xdp.md lists what it answers).
#![no_std]
#![no_main]

#[cfg(feature = "bench")]
mod bench;
mod csum;
mod edns;
mod gaps;
mod headers;
mod keybuf;
mod lookup;
mod maps;
mod negative;
mod parsed;
mod question;
mod reply;
mod rrl;
mod slots;
mod tap;
mod verdict;
mod verifier;

use aya_ebpf::bindings::xdp_action::{XDP_DROP, XDP_PASS, XDP_TX};
use aya_ebpf::bindings::xdp_md;
use aya_ebpf::macros::xdp;
use aya_ebpf::programs::XdpContext;
use xdpdns_common::rrl::class;
use xdpdns_common::tap::{kind as tap_kind, limited as tap_limited};
use xdpdns_common::{answer_flags, counter, qtype_slot, Answer, PassReason, XdpConfig};

use maps::{count, Scratch, CONFIG, SCRATCH, ZONE_QUERIES};
use verdict::{code_of, pass_code};

#[xdp]
pub fn xdpdns(ctx: XdpContext) -> u32 {
    handle(&ctx)
}

/// The whole decision for one frame: answer (XDP_TX) or pass it up.
#[inline(always)]
pub fn handle(ctx: &XdpContext) -> u32 {
    match try_answer(ctx) {
        Ok(Sent::Answer(slot, zone)) => {
            count(match slot & !qtype_slot::SIGNED {
                qtype_slot::A => counter::ANSWERED_A,
                qtype_slot::AAAA => counter::ANSWERED_AAAA,
                _ => counter::ANSWERED_OTHER,
            });
            if slot & qtype_slot::SIGNED != 0 {
                count(counter::ANSWERED_SIGNED);
            }
            if let Some(c) = ZONE_QUERIES.get_ptr_mut(zone) {
                unsafe { *c += 1 };
            }
            XDP_TX
        }
        Ok(Sent::Negative(rcode, qtype, zone)) => {
            let base = match rcode {
                0 => counter::ANSWERED_NODATA,
                _ => counter::ANSWERED_NXDOMAIN,
            };
            count(match qtype {
                qtype_slot::A => base,
                qtype_slot::AAAA => base + 1,
                _ => counter::ANSWERED_NEGATIVE_OTHER + (rcode == 0) as u32,
            });
            if let Some(c) = ZONE_QUERIES.get_ptr_mut(zone) {
                unsafe { *c += 1 };
            }
            XDP_TX
        }
        Ok(Sent::Referral(qtype, zone)) => {
            count(
                counter::REFERRALS
                    + match qtype {
                        qtype_slot::A => 0,
                        qtype_slot::AAAA => 1,
                        _ => 2,
                    },
            );
            if let Some(c) = ZONE_QUERIES.get_ptr_mut(zone) {
                unsafe { *c += 1 };
            }
            XDP_TX
        }
        Ok(Sent::Slip) => XDP_TX,
        Ok(Sent::Nothing) => XDP_DROP,
        Err(reason) => {
            count(counter::PASS_BASE + reason as u32);
            tap::passed(ctx.ctx, reason);
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

/// What the parse and the lookup found: the answer, the scratch memory
/// holding the parsed query, and the configuration.
pub struct Found {
    answer: &'static Answer,
    /// The answer is a signed variant.
    signed: bool,
    s: *mut Scratch,
    cfg: *const XdpConfig,
}

/// Parses the frame and looks its question up. Separate from the reply so
/// the timing programs can stop here (the cost breakdown).
#[inline(always)]
pub fn parse_and_lookup(ctx: &XdpContext) -> Result<Found, PassReason> {
    let cfg = CONFIG.get_ptr(0).ok_or(PassReason::NotDns)?;
    let s = SCRATCH.get_ptr_mut(0).ok_or(PassReason::ParseError)?;
    pass_code(xdpdns_parse(ctx.ctx, s, cfg))?;
    let q = unsafe { &(*s).qn };
    let (name_len, qtype, dnssec_ok) = (q.name_len, q.qtype, q.edns.dnssec_ok);
    let overlay = unsafe { (*cfg).overlay };
    let mut answer =
        lookup::lookup(unsafe { &mut *s }, name_len, qtype, overlay).ok_or(PassReason::Miss)?;
    let signed = answer.flags() & answer_flags::SIGNED != 0 && dnssec_ok;
    if signed {
        // DO=1 in a signed zone: the signed variant, whose key ends in
        // one; without it, the fallback adds the signatures.
        let slot = qtype | qtype_slot::SIGNED;
        answer =
            lookup::lookup(unsafe { &mut *s }, name_len, slot, overlay).ok_or(PassReason::Edns)?;
    }
    Ok(Found {
        answer,
        signed,
        s,
        cfg,
    })
}

/// What the kernel sent.
enum Sent {
    /// The answer: its slot (the type's, signed or not) and zone, for
    /// the counters.
    Answer(u8, u32),
    /// NODATA (0) or NXDOMAIN (3), the query type slot and the zone.
    Negative(u32, u8, u32),
    /// A referral: the query type slot and the zone.
    Referral(u8, u32),
    /// The answer slipped by rate limiting (TC=1).
    Slip,
    /// Nothing: rate limiting dropped the answer.
    Nothing,
}

#[inline(always)]
fn try_answer(ctx: &XdpContext) -> Result<Sent, PassReason> {
    let Found {
        answer,
        signed,
        s,
        cfg,
    } = match parse_and_lookup(ctx) {
        Ok(found) => found,
        Err(PassReason::Miss) => return try_negative(ctx),
        Err(e) => return Err(e),
    };
    let zone = answer.zone();
    let q = unsafe { &(*s).qn };
    let slot = q.qtype | signed as u8;
    // NODATA at the end of a CNAME chain: the chain, then the zone's SOA
    // from its negative template, found by the apex at the name's end.
    let form = match answer.soa_after() {
        None => 0,
        Some(apex_len) => {
            unsafe {
                (*s).neg_zone_len = apex_len;
                (*s).neg_risky_at = 0;
                (*s).neg_signed = 0;
                (*s).tail_len = 0;
                (*s).tail_count = 0;
                (*s).neg_slot = qtype_slot::SOA as u32;
            }
            pass_code(negative::xdpdns_negative_template(ctx.ctx, s, cfg))?;
            reply::form::NEGATIVE
        }
    };
    match send(ctx, s, cfg, answer, class::POSITIVE, form)? {
        None => Ok(Sent::Answer(slot, zone)),
        Some(limited) => Ok(limited),
    }
}

/// A query whose name has no entry: NXDOMAIN or NODATA when the EXIST
/// entries say so, else it goes up as a miss.
#[inline(always)]
fn try_negative(ctx: &XdpContext) -> Result<Sent, PassReason> {
    let cfg = CONFIG.get_ptr(0).ok_or(PassReason::NotDns)?;
    let s = SCRATCH.get_ptr_mut(0).ok_or(PassReason::ParseError)?;
    pass_code(negative::xdpdns_negative(ctx.ctx, s, cfg))?;
    pass_code(negative::xdpdns_negative_template(ctx.ctx, s, cfg))?;
    let (rcode, qtype, zone) = unsafe { ((*s).neg_rcode & 0xf, (*s).qn.qtype, (*s).neg_zone) };
    let referral = unsafe { (*s).neg_slot } == qtype_slot::REFERRAL as u32;
    let class = match (referral, rcode) {
        (true, _) => class::REFERRAL,
        (false, 0) => class::NODATA,
        (false, _) => class::NXDOMAIN,
    };
    // The reply builder looks the template up itself.
    let form = match referral {
        true => reply::form::NEGATIVE | reply::form::NOT_AUTHORITATIVE | rcode,
        false => reply::form::NEGATIVE | rcode,
    };
    match send(ctx, s, cfg, core::ptr::null(), class, form)? {
        None if referral => Ok(Sent::Referral(qtype, zone)),
        None => Ok(Sent::Negative(rcode, qtype, zone)),
        Some(limited) => Ok(limited),
    }
}

/// Builds the OPT record, lets rate limiting judge the response of
/// `class`, and writes the reply of `form` from `answer`, or its slipped
/// form. `Some` when rate limiting slipped or dropped it.
#[inline(always)]
fn send(
    ctx: &XdpContext,
    s: *mut Scratch,
    cfg: *const XdpConfig,
    answer: *const Answer,
    class: u8,
    form: u32,
) -> Result<Option<Sent>, PassReason> {
    if unsafe { (*s).qn.edns.present } {
        // Not called from `xdpdns_reply`: the two frames would not fit
        // the 512-byte stack together.
        unsafe { (*s).opt_len = edns::xdpdns_build_opt(s, cfg) };
    }
    let limited = rrl::xdpdns_rrl(s, cfg, class as u32);
    let kind = match (limited, class) {
        (0, class::POSITIVE) => tap_kind::ANSWER,
        (0, _) => tap_kind::NEGATIVE,
        _ => tap_kind::LIMITED,
    };
    // The query is kept before the reply overwrites it.
    let tapped = tap::draw(unsafe { &mut (*s).tap_skip }, cfg, kind);
    if tapped {
        tap::xdpdns_tap_query(ctx.ctx);
    }
    match limited {
        0 => {}
        1 => {
            let kept = reply::form::RCODE | reply::form::NOT_AUTHORITATIVE;
            let slip = reply::form::SLIP | (form & kept);
            pass_code(xdpdns_reply(ctx.ctx, s, cfg, answer, slip))?;
            if tapped {
                tap::xdpdns_tap_send(ctx.ctx, kind, tap_limited::SLIPPED, 1);
            }
            return Ok(Some(Sent::Slip));
        }
        _ => {
            if tapped {
                tap::xdpdns_tap_send(ctx.ctx, kind, tap_limited::DROPPED, 0);
            }
            return Ok(Some(Sent::Nothing));
        }
    }
    // Negative answers apart: their global function is not called from
    // `xdpdns_reply`, so their stack and the positive one's never add up.
    let code = match form & reply::form::NEGATIVE {
        0 => xdpdns_reply(ctx.ctx, s, cfg, answer, form),
        _ => negative::xdpdns_reply_negative(ctx.ctx, s, cfg, answer, form),
    };
    pass_code(code)?;
    if tapped {
        tap::xdpdns_tap_send(ctx.ctx, kind, 0, 1);
    }
    Ok(None)
}

/// Parses the frame: headers, question and OPT into `s.pkt` and `s.qn`,
/// the lookup keys into `s.short`/`s.long`.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_parse(ctx: *mut xdp_md, s: *mut Scratch, cfg: *const XdpConfig) -> u32 {
    let (Some(s), Some(cfg)) = (unsafe { s.as_mut() }, unsafe { cfg.as_ref() }) else {
        return code_of(Err(PassReason::ParseError));
    };
    let ctx = XdpContext::new(ctx);
    code_of((|| {
        let pkt = headers::parse(&ctx, cfg.port, cfg.filter_destination != 0, s)?;
        let qn = question::parse(&ctx, &pkt, s)?;
        if !edns::answerable(&qn.edns, cfg) {
            return Err(PassReason::Edns);
        }
        question::finish_keys(s, qn.qtype);
        s.cookie_valid = 0;
        if qn.edns.present {
            edns::prepare(s, &pkt, &qn.edns, cfg);
        }
        s.pkt = pkt;
        s.qn = qn;
        Ok(())
    })())
}

/// Turns the frame into the reply to what `xdpdns_parse` left in `s`.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_reply(
    ctx: *mut xdp_md,
    s: *mut Scratch,
    cfg: *const XdpConfig,
    answer: *const Answer,
    form: u32,
) -> u32 {
    let (Some(s), Some(cfg)) = (unsafe { s.as_mut() }, unsafe { cfg.as_ref() }) else {
        return code_of(Err(PassReason::ParseError));
    };
    let ctx = XdpContext::new(ctx);
    let pkt = s.pkt;
    let qn = s.qn;
    if form & reply::form::SLIP != 0 {
        return code_of(reply::slip(&ctx, s, &pkt, &qn, form));
    }
    let Some(answer) = (unsafe { answer.as_ref() }) else {
        return code_of(Err(PassReason::ParseError));
    };
    code_of(reply::build(&ctx, s, &pkt, &qn, answer, cfg))
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
