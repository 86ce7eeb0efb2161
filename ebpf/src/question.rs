//! The DNS header, question and optional OPT record: every condition under
//! which the kernel may answer, and the lookup key.

use aya_ebpf::helpers::bpf_xdp_load_bytes;
use aya_ebpf::programs::XdpContext;
use xdpdns_common::{qtype_slot, rtype, PassReason, DNS_HEADER_LEN, MAX_NAME_WIRE_LEN};

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
    s.question[i as usize & QUESTION_MASK]
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
    // bits clear), name ≤ 255 bytes and inside the message. The lower-cased
    // name goes into both keys on the way (zero-padded: wire names are
    // prefix-free).
    zero_keys(s);
    let mut next_label = 0u32;
    let mut name_len = 0u32;
    let mut sum = 0u64;
    for i in 0..MAX_NAME_WIRE_LEN as u32 {
        if i >= rest {
            return Err(PassReason::ParseError);
        }
        let b = q(s, i);
        sum += csum::byte(b, i & 1 == 1);
        let lb = lower(b);
        if let Some(slot) = s.long.name.get_mut(i as usize) {
            *slot = lb;
        }
        if let Some(slot) = s.short.name.get_mut(i as usize) {
            *slot = lb;
        }
        if i == next_label {
            if b == 0 {
                name_len = i + 1;
                break;
            }
            if b & 0xc0 != 0 {
                return Err(PassReason::ParseError);
            }
            next_label = i + 1 + b as u32;
        }
    }
    if name_len == 0 || name_len + 4 > rest {
        return Err(PassReason::ParseError);
    }
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

#[inline(always)]
fn lower(b: u8) -> u8 {
    // Length bytes are ≤ 63 and never in 'A'..='Z'.
    if b.is_ascii_uppercase() {
        b | 0x20
    } else {
        b
    }
}

/// Zeroes both lookup keys with word stores (no loop: a loop whose bound
/// depends on the name length would multiply the verifier's work).
#[inline(always)]
fn zero_keys(s: &mut Scratch) {
    let short = &mut s.short as *mut _ as *mut u64;
    for w in 0..8 {
        unsafe { short.add(w).write_unaligned(0) };
    }
    let long = &mut s.long.name as *mut _ as *mut u64;
    for w in 0..32 {
        unsafe { long.add(w).write_unaligned(0) };
    }
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
