//! NXDOMAIN and NODATA for queries whose name and type have no entry, from
//! the EXIST entries (a name exists, and what its negative answers are)
//! and the zone's SOA template (`xdpdns_common::negative`), byte for
//! byte as the fallback writes them.
//!
//! A name without an EXIST entry does not exist: when the name one or
//! two labels up has an EXIST entry marked ENCLOSER, the answer is
//! NXDOMAIN. Everything else (no such encloser, a cut, a wildcard, a
//! signed zone under DO=1) goes up. Names are compared as the fallback
//! compresses them, without regard to ASCII case.

use aya_ebpf::bindings::xdp_md;
use aya_ebpf::programs::XdpContext;
use xdpdns_common::negative::{
    exist_flags, fold, relocate, template_at, EXIST_HEAD, EXIST_TYPES_MAX, FIXUPS_MAX, NO_FIXUP,
    TEMPLATE_LEN,
};
use xdpdns_common::{
    answer_flags, gaps, plain_type, qtype_slot, rtype, Answer, PassReason, XdpConfig,
    BLOCK_MAX, DNS_HEADER_LEN, INLINE_MAX, MINI_BLOCK_MAX, SMALL_BLOCK_MAX,
};

use crate::headers::{load, store};
use crate::parsed::{Packet, Question, OPT_REPLY_BUF};
use crate::keybuf::copy_suffix;
use crate::question::lower8;
use crate::lookup::lookup;
use crate::maps::{tail, Scratch, BLOCKS, MINI_BLOCKS, SMALL_BLOCKS};
use crate::verdict::code_of;
use crate::{csum, edns, reply};

/// The template `xdpdns_negative` chose (the zone's SOA or a referral;
/// its name is still in the key buffer for its length).
#[inline(always)]
pub fn template(s: &mut Scratch, overlay: u32) -> Option<&'static Answer> {
    let zone_len = s.neg_zone_len;
    let slot = match s.neg_slot as u8 {
        qtype_slot::REFERRAL => qtype_slot::REFERRAL,
        _ if s.neg_signed != 0 => qtype_slot::SOA_SIGNED,
        _ => qtype_slot::SOA,
    };
    lookup(s, zone_len, slot, overlay)
}

/// Decides whether the query `xdpdns_parse` left in `s`, whose name has
/// no entry, gets NODATA or NXDOMAIN here: sets `s.neg_rcode` and
/// `s.neg_zone_len` and returns 0, or a [`PassReason`] plus one. A global
/// function: the verifier checks its lookups once, on their own.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_negative(ctx: *mut xdp_md, s: *mut Scratch, cfg: *const XdpConfig) -> u32 {
    let (Some(s), Some(cfg)) = (unsafe { s.as_mut() }, unsafe { cfg.as_ref() }) else {
        return code_of(Err(PassReason::ParseError));
    };
    let ctx = XdpContext::new(ctx);
    code_of(decide(&ctx, s, cfg))
}

/// An EXIST entry's fields, as the scalar `xdpdns_exist` returns (the
/// verifier follows one path on, not one per key table).
#[derive(Clone, Copy)]
struct ExistFound {
    zone_len: u32,
    flags: u8,
    signed: bool,
    /// The entry lists the type asked about (it has an RRset of it).
    listed: bool,
}

/// Looks up what the name of `len` bytes in its key buffer is: its EXIST
/// entry, or the facts folded into its A entry. 0 when there are none,
/// else `1 << 31 | listed << 17 | signed << 16 | flags << 8 | zone_len`,
/// where `listed` says the facts list `qtype`. `a_missing`: the name is
/// known to have no A entry (the query asked for A and found none).
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_exist(
    s: *mut Scratch,
    len: u32,
    overlay: u32,
    qtype: u32,
    a_missing: u32,
) -> u32 {
    let Some(s) = (unsafe { s.as_mut() }) else {
        return 0;
    };
    let (e, at, max) = match lookup(s, len, qtype_slot::EXIST, overlay) {
        Some(e) => (e, 0, EXIST_TYPES_MAX),
        None if a_missing != 0 => return 0,
        // A leaf with an address keeps its facts in its A entry.
        None => match lookup(s, len, qtype_slot::A, overlay) {
            Some(e) if e.holds_exist() => (e, fold::AT, fold::TYPES_MAX),
            _ => return 0,
        },
    };
    exist_word(e, at, max, qtype)
}

/// [`xdpdns_exist`]'s word for the facts at `data[at..]` of `e`, which
/// list at most `max` types.
#[inline(always)]
fn exist_word(e: &Answer, at: usize, max: usize, qtype: u32) -> u32 {
    let signed = (e.flags() & answer_flags::SIGNED != 0) as u32;
    // Only a NODATA question reads the list (qtype 0: an encloser's
    // lookup, or A/AAAA, which the flags speak for).
    let count = match qtype {
        0 => 0,
        _ => e.data[at + 2] as usize,
    };
    let mut listed = 0u32;
    for i in 0..EXIST_TYPES_MAX {
        if i >= count || i >= max {
            break;
        }
        let t = at + EXIST_HEAD + 2 * i;
        if t + 1 < INLINE_MAX && u16::from_le_bytes([e.data[t], e.data[t + 1]]) as u32 == qtype {
            listed = 1;
        }
    }
    1 << 31 | listed << 17 | signed << 16 | (e.data[at + 1] as u32) << 8 | e.data[at] as u32
}

#[inline(always)]
fn exist(s: &mut Scratch, len: u32, overlay: u32, qtype: u16, a_missing: bool) -> Option<ExistFound> {
    let v = xdpdns_exist(s, len, overlay, qtype as u32, a_missing as u32);
    (v != 0).then_some(ExistFound {
        zone_len: v & 0xff,
        flags: (v >> 8) as u8,
        signed: v & 1 << 16 != 0,
        listed: v & 1 << 17 != 0,
    })
}

#[inline(always)]
fn decide(ctx: &XdpContext, s: &mut Scratch, cfg: &XdpConfig) -> Result<(), PassReason> {
    if cfg.negative_answers == 0 {
        return Err(PassReason::Miss);
    }
    let overlay = cfg.overlay;
    let qn = s.qn;
    let n = qn.name_len;
    if n < 2 || n > 255 {
        return Err(PassReason::Miss);
    }
    let qstart = s.pkt.dns + DNS_HEADER_LEN as u32;
    let ds = qn.qtype_wire == rtype::DS;
    let nodata_bit = match qn.qtype {
        qtype_slot::A => exist_flags::NODATA_A,
        qtype_slot::AAAA => exist_flags::NODATA_AAAA,
        _ if ds => exist_flags::NODATA_DS,
        _ => exist_flags::NODATA_OTHER,
    };
    if !plain_type(qn.qtype_wire) && !ds {
        return Err(PassReason::Miss);
    }
    // The type list matters only for other types (the flags speak for
    // A, AAAA and DS).
    let listed_type = match qn.qtype {
        qtype_slot::A | qtype_slot::AAAA => 0,
        _ if ds => 0,
        _ => qn.qtype_wire,
    };
    s.neg_signed = 0;
    s.tail_kind = 0;
    s.tail_len = 0;
    s.tail_count = 0;
    // (rcode, the entry, the label to check, the template's name length
    // and slot)
    let (rcode, e, risky_at, at_len, slot) = match exist(s, n, overlay, listed_type, qn.qtype == qtype_slot::A) {
        // A delegation: its referral to every type but its own DS.
        Some(e) if e.flags & exist_flags::REFERRAL != 0 && !ds => {
            (0, e, 0, n, qtype_slot::REFERRAL)
        }
        // The name exists, and this type is missing there.
        Some(e) => {
            if e.flags & nodata_bit == 0 || e.listed {
                return Err(PassReason::Miss);
            }
            if e.signed && qn.edns.dnssec_ok {
                // DNSSEC NODATA: the zone's signed SOA, then the name's
                // NSEC (its key is still in the buffer for its length).
                let Some(d) = lookup(s, n, qtype_slot::DENIAL_SIGNED, overlay) else {
                    return Err(PassReason::Miss);
                };
                let len = d.section_len() as usize;
                if len <= INLINE_MAX || len > SMALL_BLOCK_MAX {
                    return Err(PassReason::Size);
                }
                s.neg_signed = 1;
                s.tail_kind = tail::NSEC;
                s.tail_block = d.block();
                s.tail_csum = d.csum as u32;
                s.tail_len = len as u32;
                s.tail_count = d.ancount() as u32;
            }
            (0, e, 0, e.zone_len, qtype_slot::SOA)
        }
        None => {
            let (e, label, parent_len) = closest_encloser(ctx, s, qstart, n, overlay)?;
            if e.flags & exist_flags::REFERRAL != 0 {
                (0, e, 0, parent_len, qtype_slot::REFERRAL)
            } else {
                if e.flags & exist_flags::ENCLOSER == 0 {
                    return Err(PassReason::Miss);
                }
                // At the apex, the query's label just above it must not
                // be one the SOA's names would be compressed against.
                let risky_at = match e.flags & exist_flags::APEX {
                    0 => 0,
                    _ => label + 1,
                };
                if e.signed && qn.edns.dnssec_ok {
                    // DNSSEC NXDOMAIN: the encloser's gap list (its name
                    // is still in the key buffer for its length).
                    let Some(head) = lookup(s, parent_len, qtype_slot::GAPS_SIGNED, overlay) else {
                        return Err(PassReason::Miss);
                    };
                    s.gap_count = u16::from_le_bytes([head.data[0], head.data[1]]) as u32;
                    s.gap_encloser_len = parent_len;
                    s.gap_label_at = label;
                    s.neg_signed = 1;
                }
                (3, e, risky_at, e.zone_len, qtype_slot::SOA)
            }
        }
    };
    if e.signed && qn.edns.dnssec_ok && s.neg_signed == 0 {
        return Err(PassReason::Miss);
    }
    // Handed over through scratch memory to `xdpdns_negative_template`:
    // the verifier's paths through the lookups above end here.
    s.neg_rcode = rcode;
    s.neg_zone_len = at_len;
    s.neg_risky_at = risky_at;
    s.neg_slot = slot as u32;
    Ok(())
}

/// The second half of the decision: finds the zone's SOA template (the
/// apex is the last `s.neg_zone_len` bytes of the query name) and checks
/// the query's label at `s.neg_risky_at` against it. 0, or a
/// [`PassReason`] plus one.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_negative_template(
    ctx: *mut xdp_md,
    s: *mut Scratch,
    cfg: *const XdpConfig,
) -> u32 {
    let (Some(s), Some(cfg)) = (unsafe { s.as_mut() }, unsafe { cfg.as_ref() }) else {
        return code_of(Err(PassReason::ParseError));
    };
    let ctx = XdpContext::new(ctx);
    let n = s.qn.name_len;
    let zone_len = s.neg_zone_len;
    if zone_len < 2 || zone_len > n || n > 255 {
        return code_of(Err(PassReason::Miss));
    }
    let qstart = s.pkt.dns + DNS_HEADER_LEN as u32;
    if copy_suffix(&ctx, s, qstart + (n - zone_len), zone_len).is_err() {
        return code_of(Err(PassReason::Miss));
    }
    if xdpdns_check_template(ctx.ctx, s, s.neg_risky_at, cfg.overlay) != 0 {
        return code_of(Err(PassReason::Miss));
    }
    match s.neg_signed != 0 && s.tail_kind == 0 {
        true => crate::gaps::xdpdns_gap_search(ctx.ctx, s, cfg),
        false => 0,
    }
}

/// The EXIST entry of the first name one or two labels above the query
/// name that has one, the offset of the label below it, and its length.
#[inline(always)]
fn closest_encloser(
    ctx: &XdpContext,
    s: &mut Scratch,
    qstart: u32,
    n: u32,
    overlay: u32,
) -> Result<(ExistFound, u32, u32), PassReason> {
    let mut skip = 0u32;
    for _ in 0..2 {
        let [len, _] = load::<2>(ctx, qstart + (skip & 0xff))?;
        let label = skip;
        skip += 1 + len as u32;
        if skip + 1 >= n || skip > 255 {
            return Err(PassReason::Miss);
        }
        let parent_len = n - skip;
        copy_suffix(ctx, s, qstart + skip, parent_len)?;
        if let Some(e) = exist(s, parent_len, overlay, 0, false) {
            return Ok((e, label, parent_len));
        }
    }
    Err(PassReason::Miss)
}

/// Finds the zone's SOA template (its apex name is in the key buffer for
/// `s.neg_zone_len`) and checks the query's label at question offset
/// `risky_at` (0: none) against the labels it must not have: 0 when the
/// template is there and the label is not one of them.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_check_template(
    ctx: *mut xdp_md,
    s: *mut Scratch,
    risky_at: u32,
    overlay: u32,
) -> u32 {
    let Some(s) = (unsafe { s.as_mut() }) else {
        return 1;
    };
    let ctx = XdpContext::new(ctx);
    let qstart = s.pkt.dns + DNS_HEADER_LEN as u32;
    let Some(t) = template(s, overlay) else {
        return 1;
    };
    if t.section_len() as usize > SMALL_BLOCK_MAX {
        return 1;
    }
    let Some(b) = (unsafe { SMALL_BLOCKS.get(&t.block()) }) else {
        return 1;
    };
    s.neg_zone = t.zone();
    if risky_at == 0 {
        return 0;
    }
    let at = qstart + ((risky_at - 1) & 0xff);
    let (Ok([len, _]), Ok(word)) = (load::<2>(&ctx, at), load::<8>(&ctx, at)) else {
        return 1;
    };
    let keep = if len >= 7 {
        u64::MAX
    } else {
        (1u64 << (8 * (1 + len as u32))) - 1
    };
    // Compression ignores case: so does the check (the risky labels are
    // stored lower-cased).
    let label = lower8(u64::from_le_bytes(word) & keep);
    let risky = |i: usize| {
        let at = template_at::RISKY + 8 * i;
        let mut r = [0u8; 8];
        r.copy_from_slice(&b.data[at..at + 8]);
        u64::from_le_bytes(r)
    };
    (label == risky(0) || label == risky(1)) as u32
}

/// Turns the frame into the negative answer `xdpdns_negative` (or a
/// CNAME chain's end) decided: `answer` is the chain's answer records,
/// if any; the template and what follows it are found from `s`.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_reply_negative(
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
    let (pkt, qn) = (s.pkt, s.qn);
    let Some(t) = template(s, cfg.overlay) else {
        return code_of(Err(PassReason::Miss));
    };
    // A chain's answer records come first (none: a plain negative).
    let prefix = unsafe { answer.as_ref() };
    let built = build(&ctx, s, (&pkt, &qn), (prefix, t), cfg, form & reply::form::RCODE);
    // Counted here, where the verifier follows one path on.
    if built.is_ok() && s.neg_signed != 0 {
        crate::maps::count(xdpdns_common::counter::ANSWERED_SIGNED);
    }
    code_of(built)
}

/// Writes the records that follow a DNSSEC negative answer's signed
/// SOA (`s.tail_kind`: a NODATA's NSEC entry, as it is, or an
/// NXDOMAIN's gap entry, its pointers moved for the question's name) at
/// frame offset `off` (`rel` bytes after the DNS header, for the
/// checksum's byte order); returns what moved pointers add to the
/// checksum. Their blocks are still there: blocks outlive the packets
/// that read them.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_tail_write(ctx: *mut xdp_md, s: *const Scratch, off: u32, rel: u32) -> u32 {
    let Some(s) = (unsafe { s.as_ref() }) else {
        return 0;
    };
    let ctx = XdpContext::new(ctx);
    let len = s.tail_len;
    if s.tail_kind == tail::NSEC {
        if let Some(b) = unsafe { SMALL_BLOCKS.get(&s.tail_block) } {
            reply::store_bytes::<SMALL_BLOCK_MAX, 0>(&ctx, off, &b.data, len);
        }
        return 0;
    }
    let Some(b) = (unsafe { BLOCKS.get(&s.tail_block) }) else {
        return 0;
    };
    reply::store_bytes::<BLOCK_MAX, { gaps::RECORDS_AT }>(&ctx, off, &b.data, len);
    let sample_len = u16::from_le_bytes([
        b.data[gaps::TEMPLATE_AT + template_at::SAMPLE_LEN],
        b.data[gaps::TEMPLATE_AT + template_at::SAMPLE_LEN + 1],
    ]) as u32;
    let mut sum = 0u64;
    for i in 0..FIXUPS_MAX {
        let f = gaps::TEMPLATE_AT + template_at::FIXUPS + 2 * i;
        let at = u16::from_le_bytes([b.data[f], b.data[f + 1]]);
        if at == NO_FIXUP || at as u32 + 2 > len {
            break;
        }
        let Ok(old) = load::<2>(&ctx, off + at as u32) else {
            continue;
        };
        let target = (u16::from_be_bytes(old) & 0x3fff) as u32;
        let pointer = 0xc000 | relocate(target, sample_len, s.qn.name_len, 0) as u16;
        let _ = store(&ctx, off + at as u32, &pointer.to_be_bytes());
        sum += csum::at_parity(pointer, (rel + at as u32) & 1 == 1);
    }
    // At most sixteen 16-bit words: no carry is lost.
    sum as u32
}

/// Turns the frame into the negative answer: the header with `rcode`
/// and the authority records, the question as sent, the answer records
/// of `prefix` (a CNAME chain ending in NODATA; none for a plain
/// negative), the records of template `t` (the SOA, signed or not, or a
/// referral) with their pointers moved for this question and prefix, the
/// the records a DNSSEC negative answer adds (`xdpdns_tail_write`), the
/// OPT.
#[inline(always)]
pub fn build(
    ctx: &XdpContext,
    s: &mut Scratch,
    (pkt, qn): (&Packet, &Question),
    (prefix, t): (Option<&Answer>, &Answer),
    cfg: &XdpConfig,
    rcode: u32,
) -> Result<(), PassReason> {
    let tlen = t.section_len() as u32;
    if tlen < TEMPLATE_LEN as u32 + 8 || tlen > SMALL_BLOCK_MAX as u32 {
        return Err(PassReason::Size);
    }
    let rec_len = tlen - TEMPLATE_LEN as u32;
    let (plen, ancount, psum) = match prefix {
        None => (0, 0, 0),
        Some(p) => (p.section_len() as u32, p.ancount(), p.csum),
    };
    // Chains are short: inline or in a mini or small block.
    let (mini, small) = match prefix {
        Some(p) if plen as usize > INLINE_MAX => {
            if plen as usize > SMALL_BLOCK_MAX {
                return Err(PassReason::Size);
            }
            match plen as usize <= MINI_BLOCK_MAX {
                true => (
                    Some(unsafe { MINI_BLOCKS.get(&p.block()) }.ok_or(PassReason::Miss)?),
                    None,
                ),
                false => (
                    None,
                    Some(unsafe { SMALL_BLOCKS.get(&p.block()) }.ok_or(PassReason::Miss)?),
                ),
            }
        }
        _ => (None, None),
    };
    // Templates are small blocks (the compiler makes no larger ones).
    let b = unsafe { SMALL_BLOCKS.get(&t.block()) }.ok_or(PassReason::Miss)?;
    // The template's head, read where it is (a copy would cost the
    // stack 56 bytes).
    let head = &b.data;
    let opt_len = if qn.edns.present {
        edns::built_len(s)?
    } else {
        0
    };
    let question_len = qn.name_len + 4;
    // A DNSSEC negative answer's NSEC records (none: 0).
    let (tlen_after, tcount) = (s.tail_len & 0x7ff, s.tail_count as u16 & 0xff);
    let dns_len = DNS_HEADER_LEN as u32 + question_len + plen + rec_len + tlen_after + opt_len;
    if dns_len > reply::reply_limit(&qn.edns, cfg.udp_payload) {
        return Err(PassReason::Size);
    }
    let answer_off = pkt.dns + DNS_HEADER_LEN as u32 + question_len;
    reply::resize(ctx, answer_off, pkt.dns + dns_len)?;

    // From here on nothing can fail: the frame is the reply's size.
    // One helper call each for the prefix, the record and the OPT: copy
    // loops would cost the verifier as much again as the positive reply's.
    match (prefix, mini, small) {
        (Some(_), Some(b), _) => reply::store_bytes::<MINI_BLOCK_MAX, 0>(ctx, answer_off, &b.data, plen),
        (Some(_), _, Some(b)) => reply::store_bytes::<SMALL_BLOCK_MAX, 0>(ctx, answer_off, &b.data, plen),
        (Some(p), _, _) => reply::store_bytes::<INLINE_MAX, 0>(ctx, answer_off, &p.data, plen),
        (None, _, _) => {}
    }
    let rec_off = answer_off + plen;
    reply::store_bytes::<SMALL_BLOCK_MAX, TEMPLATE_LEN>(ctx, rec_off, &b.data, rec_len);
    let mut sum = qn.sum + csum::at_parity(psum, question_len & 1 == 1);
    let rec_rel = question_len + plen;
    sum += csum::at_parity(t.csum, rec_rel & 1 == 1);
    let sample_len = u16::from_le_bytes([head[0], head[1]]) as u32;
    for i in 0..FIXUPS_MAX {
        let f = template_at::FIXUPS + 2 * i;
        let at = u16::from_le_bytes([head[f], head[f + 1]]);
        if at == NO_FIXUP || at as u32 + 2 > rec_len {
            break;
        }
        let Ok(old) = load::<2>(ctx, rec_off + at as u32) else {
            continue;
        };
        let target = (u16::from_be_bytes(old) & 0x3fff) as u32;
        let moved = relocate(target, sample_len, qn.name_len, plen);
        let pointer = 0xc000 | moved as u16;
        let _ = store(ctx, rec_off + at as u32, &pointer.to_be_bytes());
        sum += csum::at_parity(pointer, (rec_rel + at as u32) & 1 == 1);
    }
    if tlen_after != 0 {
        let off = rec_off + rec_len;
        let rel = rec_rel + rec_len;
        sum += csum::at_parity(s.tail_csum as u16, rel & 1 == 1);
        sum += xdpdns_tail_write(ctx.ctx, s, off, rel) as u64;
    }
    if qn.edns.present {
        let rel = DNS_HEADER_LEN as u32 + rec_rel + rec_len + tlen_after;
        reply::store_bytes::<{ OPT_REPLY_BUF }, 0>(
            ctx,
            rec_off + rec_len + tlen_after,
            &s.opt_reply,
            opt_len,
        );
        sum += csum::at_parity(s.opt_sum as u16, rel & 1 == 1);
    }
    let mut header = qn.header;
    // QR, AA (not for a referral), RD copied; opcode 0
    let aa = (head[template_at::AUTHORITATIVE] != 0) as u8;
    header[2] = 0x80 | aa << 2 | (header[2] & 0x01);
    header[3] = (header[3] & 0x10) | (rcode & 0xf) as u8; // CD copied
    header[6..8].copy_from_slice(&ancount.to_be_bytes()); // the chain, if any
    let authority = head[template_at::AUTHORITY] as u16 + tcount;
    header[8..10].copy_from_slice(&authority.to_be_bytes());
    // The query's ARCOUNT is its OPT record (one or none).
    let arcount = head[template_at::ADDITIONAL] as u16 + u16::from_be_bytes([header[10], header[11]]);
    header[10..12].copy_from_slice(&arcount.to_be_bytes());
    let _ = store(ctx, pkt.dns, &header);
    sum += csum::words(&header);
    reply::finish(ctx, s, pkt, dns_len, sum);
    Ok(())
}
