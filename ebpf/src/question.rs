//! The DNS header, question and optional OPT record: every condition under
//! which the kernel may answer, and the lookup key.

use aya_ebpf::helpers::bpf_xdp_load_bytes;
use aya_ebpf::programs::XdpContext;
use xdpdns_common::{
    qtype_slot, rtype, PassReason, DNS_HEADER_LEN, MAX_NAME_WIRE_LEN, SHORT_NAME_MAX,
};

use crate::csum;
use crate::headers::{be16, load, Packet};
use crate::maps::{Scratch, QUESTION_BUF, QUESTION_MASK};

/// Longest question section we may answer: name, type, class, one OPT.
const MAX_REST: u32 = MAX_NAME_WIRE_LEN as u32 + 4 + OPT_LEN;
pub const OPT_LEN: u32 = 11;
const _: () = assert!(MAX_REST as usize <= QUESTION_BUF);

pub struct Question {
    pub header: [u8; DNS_HEADER_LEN],
    /// Wire length of the query name, root label included.
    pub name_len: u32,
    pub qtype: u8,
    /// Client's EDNS payload size, if the query carried an OPT.
    pub edns_payload: Option<u16>,
    /// Ones'-complement sum of the question section (name, type, class)
    /// taken from an even offset.
    pub sum: u64,
}

#[inline(always)]
fn q(s: &Scratch, i: u32) -> u8 {
    s.question[crate::opaque(i) as usize & QUESTION_MASK]
}

/// Checks the message and copies its question into `s.question`.
#[inline(always)]
pub fn parse(ctx: &XdpContext, pkt: &Packet, s: &mut Scratch) -> Result<Question, PassReason> {
    if pkt.dns_len < DNS_HEADER_LEN as u32 {
        return Err(PassReason::NotQuery);
    }
    let header: [u8; DNS_HEADER_LEN] = load(ctx, pkt.dns)?;
    // QR=0 and opcode QUERY; TC/AA/Z/RCODE bits of a query are ignored by
    // the fallback server too.
    if header[2] & 0xf8 != 0 {
        return Err(PassReason::NotQuery);
    }
    let arcount = be16(&header, 10);
    if be16(&header, 4) != 1 || be16(&header, 6) != 0 || be16(&header, 8) != 0 || arcount > 1 {
        return Err(PassReason::NotQuery);
    }
    let rest = pkt.dns_len - DNS_HEADER_LEN as u32;
    if rest < 5 || rest > MAX_REST {
        return Err(PassReason::ParseError);
    }
    // Re-masked after an opaque read: the verifier needs the bound on the
    // register passed to the helper, which the optimiser would drop.
    let len = crate::opaque(rest) & QUESTION_MASK as u32;
    if len == 0 {
        return Err(PassReason::ParseError);
    }
    let rc = unsafe {
        bpf_xdp_load_bytes(
            ctx.ctx,
            pkt.dns + DNS_HEADER_LEN as u32,
            s.question.as_mut_ptr() as *mut _,
            len,
        )
    };
    if rc != 0 {
        return Err(PassReason::ParseError);
    }

    // Walk the labels: no compression pointers, labels ≤ 63 (the top two
    // bits clear), name ≤ 255 bytes and inside the message. One step per
    // label, not per byte.
    let mut pos = 0u32;
    let mut name_len = 0u32;
    for _ in 0..128 {
        if pos >= rest || pos >= MAX_NAME_WIRE_LEN as u32 {
            return Err(PassReason::ParseError);
        }
        let b = q(s, pos);
        if b == 0 {
            name_len = pos + 1;
            break;
        }
        if b & 0xc0 != 0 {
            return Err(PassReason::ParseError);
        }
        pos += 1 + b as u32;
    }
    if name_len == 0 || name_len + 4 > rest {
        return Err(PassReason::ParseError);
    }
    let name_len = launder(s, name_len);
    if name_len == 0 || name_len > MAX_NAME_WIRE_LEN as u32 {
        return Err(PassReason::ParseError);
    }
    let mut sum = copy_name(s, name_len);
    let odd = name_len & 1 == 1;
    let qtype_hi = q(s, name_len);
    let qtype_lo = q(s, name_len + 1);
    let class_hi = q(s, name_len + 2);
    let class_lo = q(s, name_len + 3);
    sum += csum::byte(qtype_hi, odd) + csum::byte(qtype_lo, !odd);
    sum += csum::byte(class_hi, odd) + csum::byte(class_lo, !odd);
    if u16::from_be_bytes([class_hi, class_lo]) != 1 {
        return Err(PassReason::QueryType);
    }
    let qtype = match u16::from_be_bytes([qtype_hi, qtype_lo]) {
        rtype::A => qtype_slot::A,
        rtype::AAAA => qtype_slot::AAAA,
        _ => return Err(PassReason::QueryType),
    };

    let trailing = rest - (name_len + 4);
    let edns_payload = match (arcount, trailing) {
        (0, 0) => None,
        (1, OPT_LEN) => Some(parse_opt(s, name_len + 4)?),
        _ => return Err(PassReason::ParseError),
    };
    Ok(Question {
        header,
        name_len,
        qtype,
        edns_payload,
        sum,
    })
}

/// An OPT the fast path handles: root owner, version 0, extended RCODE 0,
/// DO clear, no options. Returns the client's payload size.
#[inline(always)]
fn parse_opt(s: &Scratch, at: u32) -> Result<u16, PassReason> {
    let owner = q(s, at);
    let ty = u16::from_be_bytes([q(s, at + 1), q(s, at + 2)]);
    if owner != 0 || ty != rtype::OPT {
        return Err(PassReason::ParseError);
    }
    let payload = u16::from_be_bytes([q(s, at + 3), q(s, at + 4)]);
    let ext_rcode = q(s, at + 5);
    let version = q(s, at + 6);
    let do_bit = q(s, at + 7) & 0x80;
    let rdlen = u16::from_be_bytes([q(s, at + 9), q(s, at + 10)]);
    if ext_rcode != 0 || version != 0 || do_bit != 0 || rdlen != 0 {
        return Err(PassReason::Edns);
    }
    Ok(payload)
}

/// Passes `v` through map memory so the verifier sees an unknown value:
/// the label walk can end in up to 128 different states, and without this
/// every one of them would be verified through the rest of the program.
#[inline(always)]
fn launder(s: &mut Scratch, v: u32) -> u32 {
    unsafe {
        core::ptr::write_volatile(&mut s.launder, v);
        core::ptr::read_volatile(&s.launder)
    }
}

/// ASCII lower-casing of eight bytes at once: sets 0x20 in every byte in
/// 'A'..='Z' and leaves all others (length bytes, non-ASCII) alone.
#[inline(always)]
fn lower8(w: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let h = w & LOW7;
    let ge_a = h + 0x3f3f_3f3f_3f3f_3f3f; // high bit set when byte >= 'A'
    let gt_z = h + 0x2525_2525_2525_2525; // high bit set when byte > 'Z'
    let upper = ge_a & !gt_z & !w & HIGH;
    w | (upper >> 2)
}

/// Copies the name, lower-cased, into the key for its length (zero-padded:
/// wire names are prefix-free) eight bytes at a time, and returns the
/// ones'-complement sum of the name as sent.
#[inline(always)]
fn copy_name(s: &mut Scratch, name_len: u32) -> u64 {
    let src = s.question.as_ptr() as *const u64;
    let short = name_len as usize <= SHORT_NAME_MAX;
    let dst = if short {
        &mut s.short as *mut _ as *mut u64
    } else {
        &mut s.long.name as *mut _ as *mut u64
    };
    let words = if short { 8 } else { 32 };
    for w in 0..32 {
        if w >= words {
            break;
        }
        unsafe { dst.add(w).write(0) };
    }
    let mut sum = 0u64;
    for w in 0..32u32 {
        let start = w * 8;
        if start >= name_len {
            break;
        }
        let mut word = unsafe { src.add(w as usize).read() };
        let valid = name_len - start;
        if valid < 8 {
            word &= (1u64 << (valid * 8)) - 1;
        }
        let be = word.swap_bytes();
        sum += (be >> 32) + (be & 0xffff_ffff);
        unsafe { dst.add(w as usize & 31).write(lower8(word)) };
    }
    sum
}

/// Sets the non-name fields of both keys (the name was written while the
/// question was walked).
#[inline(always)]
pub fn finish_keys(s: &mut Scratch, qtype: u8, generation: u8) {
    s.short.qtype = qtype;
    s.short.generation = generation;
    s.long.qtype = qtype;
    s.long.generation = generation;
}
