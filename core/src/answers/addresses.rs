//! A and AAAA entries, written directly: fixed-size records owned by a
//! pointer to the question (0xC00C), rotated by the kernel where the zone
//! rotates, with their RRSIGs after them in a signed zone's variant.

use std::sync::Arc;

use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
use xdpdns_common::{answer_flags, rotation, Answer, BLOCK_MAX, INLINE_MAX};

use super::entry::{ones_complement_sum, Compiled};
use crate::zone::RRset;

/// `set`'s answer section followed by its RRSIGs (`sigs`), each owned by
/// a pointer to the question, as the fallback encodes them (hickory
/// writes RRSIG data in canonical form: the signer name uncompressed and
/// lower case). `rotate`: the RRset is sent rotated, the RRSIGs after it
/// ([`answer_flags::rotate`]). `None` when it would not fit a block, or
/// the kernel could not rotate it.
pub fn encode_signed_answer(set: &RRset, sigs: &RRset, rotate: bool) -> Option<Compiled> {
    let plain = encode_answer(set, 0)?;
    let rotated_len = plain.section().len();
    let mut section = plain.section().to_vec();
    for sig in sigs.rdatas() {
        let mut rdata = Vec::with_capacity(128);
        sig.emit(&mut BinEncoder::new(&mut rdata)).ok()?;
        section.extend_from_slice(&[0xc0, 0x0c]);
        section.extend_from_slice(&u16::from(RecordType::RRSIG).to_be_bytes());
        section.extend_from_slice(&1u16.to_be_bytes());
        section.extend_from_slice(&sigs.ttl.to_be_bytes());
        section.extend_from_slice(&u16::try_from(rdata.len()).ok()?.to_be_bytes());
        section.extend_from_slice(&rdata);
    }
    let count = u8::try_from(set.len() + sigs.len()).ok()?;
    if section.len() > BLOCK_MAX {
        return None;
    }
    let flags = match rotate && set.len() >= 2 {
        false => 0,
        true if sigs.len() > answer_flags::TRAILING_MAX as usize
            || !rotation::fits_kernel(section.len(), rotated_len) =>
        {
            return None
        }
        true => answer_flags::rotate(sigs.len() as u16),
    };
    let mut head = Answer::new(section.len() as u16, count, flags);
    head.csum = ones_complement_sum(&section);
    if section.len() <= INLINE_MAX {
        head.data[..section.len()].copy_from_slice(&section);
        return Some(Compiled { head, block: None });
    }
    Some(Compiled {
        head,
        block: Some(Arc::from(section)),
    })
}

/// The answer section exactly as the fallback encodes it: each record
/// owned by a pointer to the question name (0xC00C), class IN, with
/// `flags` ([`answer_flags::ROTATE`] only on a set of two or more). `None`
/// when it is not A/AAAA, larger than a block, or too large for the
/// kernel to rotate.
pub fn encode_answer(set: &RRset, flags: u16) -> Option<Compiled> {
    let (rtype, addr_len) = match set.rtype {
        RecordType::A => (1u16, 4),
        RecordType::AAAA => (28, 16),
        _ => return None,
    };
    let count = set.len();
    let len = count * (12 + addr_len);
    if len == 0 || len > BLOCK_MAX || set.wire().any(|w| w.len() != addr_len) {
        return None;
    }
    let flags = match count {
        0 | 1 => flags & !answer_flags::ROTATE,
        _ => flags,
    };
    if flags & answer_flags::ROTATE != 0 && !rotation::fits_kernel(len, len) {
        return None;
    }
    let mut head = Answer::new(len as u16, count as u8, flags);
    let mut big = Vec::new();
    let out: &mut [u8] = if len <= INLINE_MAX {
        &mut head.data[..len]
    } else {
        big.resize(len, 0);
        &mut big
    };
    for (rec, addr) in out.chunks_exact_mut(12 + addr_len).zip(set.wire()) {
        rec[..2].copy_from_slice(&[0xc0, 0x0c]);
        rec[2..4].copy_from_slice(&rtype.to_be_bytes());
        rec[4..6].copy_from_slice(&1u16.to_be_bytes());
        rec[6..10].copy_from_slice(&set.ttl.to_be_bytes());
        rec[10..12].copy_from_slice(&(addr_len as u16).to_be_bytes());
        rec[12..].copy_from_slice(addr);
    }
    head.csum = ones_complement_sum(out);
    Some(Compiled {
        head,
        block: (!big.is_empty()).then(|| Arc::from(big)),
    })
}
