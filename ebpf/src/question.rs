//! The DNS header, question and optional OPT record: every condition under
//! which the kernel may answer, and the lookup key. Reads the packet
//! directly (a helper call costs more than the whole walk).

use aya_ebpf::programs::XdpContext;
use xdpdns_common::{OPT_LEN, OPT_RDATA_MAX,
    key_lead, key_tail, layer, plain_type, qtype_slot, rtype, PassReason, DNS_HEADER_LEN, LONG_NAME_BUF, MAX_NAME_WIRE_LEN,
    SHORT_NAME_MAX, TINY_NAME_MAX,
};

use crate::csum;
use crate::edns;
use crate::verifier::launder;
use crate::parsed::{Edns, Packet, Question};
use crate::headers::{be16, load};
use crate::maps::Scratch;

/// Longest question section we may answer: name, type, class, one OPT.
const MAX_REST: u32 = MAX_NAME_WIRE_LEN as u32 + 4 + OPT_LEN + OPT_RDATA_MAX;

/// Checks the message and writes the lower-cased query name into the
/// lookup key for its length.
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
    let qstart = pkt.dns + DNS_HEADER_LEN as u32;

    // Walk the labels: no compression pointers, labels ≤ 63 (the top two
    // bits clear), name ≤ 255 bytes and inside the message. One step per
    // label, not per byte.
    let mut pos = 0u32;
    let mut name_len = 0u32;
    for _ in 0..128 {
        // Laundered each step so every iteration looks alike to the
        // verifier and its states prune.
        let pos_now = launder(s, pos);
        pos = pos_now;
        if pos >= rest || pos >= MAX_NAME_WIRE_LEN as u32 {
            return Err(PassReason::ParseError);
        }
        // Two bytes (a label byte is always followed by more question):
        // the verifier cannot prove a one-byte packet read.
        let [b, _] = load::<2>(ctx, qstart + pos)?;
        if b == 0 {
            name_len = pos + 1;
            break;
        }
        if b & 0xc0 != 0 {
            return Err(PassReason::ParseError);
        }
        pos += 1 + b as u32;
    }
    let name_len = launder(s, name_len);
    if name_len == 0 || name_len > MAX_NAME_WIRE_LEN as u32 || name_len + 4 > rest {
        return Err(PassReason::ParseError);
    }
    let mut sum = copy_name(ctx, qstart, s, name_len)?;
    // The copy loop's exits narrow name_len differently; merge them again.
    let name_len = launder(s, name_len);
    if name_len == 0 || name_len > MAX_NAME_WIRE_LEN as u32 || name_len + 4 > rest {
        return Err(PassReason::ParseError);
    }

    let tc: [u8; 4] = load(ctx, qstart + name_len)?;
    sum += csum::at_parity(csum::fold(csum::words(&tc)), name_len & 1 == 1);
    if u16::from_be_bytes([tc[2], tc[3]]) != 1 {
        return Err(PassReason::QueryType);
    }
    let qtype_wire = u16::from_be_bytes([tc[0], tc[1]]);
    // Every data type, and DS (answered by the parent at a cut): a type
    // without a key tail misses and goes to the negative answers.
    let qtype = match qtype_wire {
        t if plain_type(t) || t == rtype::DS => qtype_slot::of(t),
        _ => return Err(PassReason::QueryType),
    };

    let trailing = rest - (name_len + 4);
    let edns = match arcount {
        0 if trailing == 0 => Edns::ABSENT,
        1 => edns::parse(ctx, s, qstart + name_len + 4, trailing)?,
        _ => return Err(PassReason::ParseError),
    };
    Ok(Question {
        header,
        name_len,
        qtype,
        qtype_wire,
        edns,
        sum,
    })
}

/// ASCII lower-casing of four bytes at once: sets 0x20 in every byte in
/// 'A'..='Z' and leaves all others (length bytes, non-ASCII) alone.
#[inline(always)]
fn lower4(w: u32) -> u32 {
    const LOW7: u32 = 0x7f7f_7f7f;
    const HIGH: u32 = 0x8080_8080;
    let h = w & LOW7;
    let ge_a = h + 0x3f3f_3f3f; // high bit set when byte >= 'A'
    let gt_z = h + 0x2525_2525; // high bit set when byte > 'Z'
    let upper = ge_a & !gt_z & !w & HIGH;
    w | (upper >> 2)
}

/// [`lower4`] for eight bytes.
#[inline(always)]
pub fn lower8(w: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let h = w & LOW7;
    let ge_a = h + 0x3f3f_3f3f_3f3f_3f3f;
    let gt_z = h + 0x2525_2525_2525_2525;
    let upper = ge_a & !gt_z & !w & HIGH;
    w | (upper >> 2)
}

/// Copies the name, lower-cased, into the key for its length (zero-padded:
/// wire names are prefix-free) four bytes at a time, notes in
/// `s.mixed_case` whether it had upper-case letters, and returns the
/// ones'-complement sum of the name as sent. The name is followed by at
/// least four bytes (type, class), so a four-byte read starting inside the
/// name never leaves the frame: one path per step keeps the verifier's
/// work linear.
#[inline(always)]
fn copy_name(
    ctx: &XdpContext,
    qstart: u32,
    s: &mut Scratch,
    name_len: u32,
) -> Result<u64, PassReason> {
    let (dst64, words) = if name_len as usize <= TINY_NAME_MAX {
        (&mut s.tiny.key.name as *mut _ as *mut u64, TINY_NAME_MAX / 8)
    } else if name_len as usize <= SHORT_NAME_MAX {
        (&mut s.short.key.name as *mut _ as *mut u64, SHORT_NAME_MAX / 8)
    } else {
        (&mut s.long.key.name as *mut _ as *mut u64, LONG_NAME_BUF / 8)
    };
    for w in 0..32 {
        if w >= words {
            break;
        }
        // Volatile: as plain stores LLVM turns the loop into a `memset`
        // call, a byte loop the verifier walks 256 times per state.
        unsafe { core::ptr::write_volatile(dst64.add(w), 0) };
    }
    let dst = dst64 as *mut u32;
    let mut sum = 0u64;
    for w in 0..64u32 {
        let start = w * 4;
        if start >= name_len {
            break;
        }
        let mut word = u32::from_le_bytes(load(ctx, qstart + start)?);
        let valid = name_len - start;
        if valid < 4 {
            word &= (1u32 << (valid * 8)) - 1;
        }
        sum += word.swap_bytes() as u64;
        unsafe { dst.add(w as usize & 63).write(lower4(word)) };
    }
    Ok(sum)
}

/// Sets the non-name fields of the keys: the lead and the query type's
/// tail.
#[inline(always)]
pub fn finish_keys(s: &mut Scratch, slot: u8) {
    // Only the key for the name's length holds the name; marking the
    // others too costs less than choosing.
    s.tiny.key.name[0] = key_lead(s.tiny.key.name[0], slot, layer::BASE);
    s.short.key.name[0] = key_lead(s.short.key.name[0], slot, layer::BASE);
    s.long.key.name[0] = key_lead(s.long.key.name[0], slot, layer::BASE);
    let tail = key_tail(slot);
    s.tiny.key.name[TINY_NAME_MAX - 1] = tail;
    s.short.key.name[SHORT_NAME_MAX - 1] = tail;
    s.long.key.name[LONG_NAME_BUF - 1] = tail;
}
