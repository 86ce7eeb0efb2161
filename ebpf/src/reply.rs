//! Turns the query frame into the reply in place. Called only after every
//! check has passed; the one step that can fail (growing the frame) comes
//! first, so a failure leaves the frame unchanged.

use aya_ebpf::helpers::{bpf_xdp_adjust_head, bpf_xdp_adjust_tail, bpf_xdp_store_bytes};
use aya_ebpf::programs::XdpContext;
use xdpdns_common::{
    rotation, Answer, PassReason, XdpConfig, BLOCK_MAX, CLASSIC_UDP_PAYLOAD, DNS_HEADER_LEN,
    INLINE_MAX, MINI_BLOCK_MAX, SMALL_BLOCK_MAX,
};

use crate::csum;
use crate::edns;
use crate::parsed::{Edns, Packet, Question, UDP_LEN};
use crate::headers::{load, store};
use crate::maps::{Scratch, BLOCKS, MINI_BLOCKS, SMALL_BLOCKS};

const REPLY_HOP_LIMIT: u8 = 64;

/// Largest reply the client accepts: 512 without EDNS, else its size
/// capped by ours, never below 512 (the fallback's rule).
#[inline(always)]
pub fn reply_limit(e: &Edns, ours: u16) -> u32 {
    match e.present {
        false => CLASSIC_UDP_PAYLOAD as u32,
        true => {
            let p = e.payload;
            let p = if p < ours { p } else { ours };
            if p < CLASSIC_UDP_PAYLOAD {
                CLASSIC_UDP_PAYLOAD as u32
            } else {
                p as u32
            }
        }
    }
}

/// Makes the frame `len` bytes long, keeping its first `keep` bytes (the
/// query up to the end of its question). Grows at the tail when the
/// buffer has room there; otherwise (native mode on veth hands
/// right-sized buffers: only the headroom and the tail's alignment slack
/// are free) at the head, as far as the headroom allows, and the rest at
/// the tail, moving the kept bytes forward. On failure the frame is
/// unchanged.
#[inline(always)]
pub fn resize(ctx: &XdpContext, keep: u32, len: u32) -> Result<(), PassReason> {
    let frame_len = (ctx.data_end() - ctx.data()) as u32;
    let delta = len as i32 - frame_len as i32;
    if delta == 0 || unsafe { bpf_xdp_adjust_tail(ctx.ctx, delta) } == 0 {
        return Ok(());
    }
    if delta < 0 || keep < 8 || keep > frame_len {
        return Err(PassReason::Size);
    }
    let head = delta.min(HEAD_GROWTH_MAX);
    let rest = delta - head;
    if rest > 0 && unsafe { bpf_xdp_adjust_tail(ctx.ctx, rest) } != 0 {
        return Err(PassReason::Size);
    }
    if unsafe { bpf_xdp_adjust_head(ctx.ctx, -head) } != 0 {
        if rest > 0 {
            unsafe { bpf_xdp_adjust_tail(ctx.ctx, -rest) };
        }
        return Err(PassReason::Size);
    }
    // The old bytes now start at `head`. Moving forward, each chunk is
    // read before anything is written over it; the last (overlapping)
    // chunk is read first, as the loop may overwrite its source.
    let delta = head as u32;
    let tail: [u8; 8] = load(ctx, delta + keep - 8).map_err(|_| PassReason::Size)?;
    for i in 0..(KEEP_MAX / 8) {
        if i * 8 + 8 > keep {
            break;
        }
        let Ok(chunk) = load::<8>(ctx, delta + i * 8) else {
            break;
        };
        if !store(ctx, i * 8, &chunk) {
            break;
        }
    }
    let _ = store(ctx, keep - 8, &tail);
    Ok(())
}

/// Copies the first `len` bytes of `src` (at least eight) to frame
/// offset `off`.
#[inline(always)]
fn copy_section<const N: usize>(ctx: &XdpContext, src: &[u8; N], len: u32, off: u32) {
    copy_section_at(ctx, src, 0, len, off)
}

/// Copies `len` bytes of `src` from `from` (at least eight) to frame
/// offset `off`: eight bytes at a time, then the last eight once more.
#[inline(always)]
pub fn copy_section_at<const N: usize>(
    ctx: &XdpContext,
    src: &[u8; N],
    from: u32,
    len: u32,
    off: u32,
) {
    let p = src.as_ptr();
    for i in 0..(N / 8) as u32 {
        if i * 8 + 8 > len {
            break;
        }
        // Bounded on the very register the read uses (as below).
        let at = crate::verifier::opaque(from.wrapping_add(i * 8));
        if at as usize > N - 8 {
            break;
        }
        let chunk = unsafe { (p.add(at as usize) as *const [u8; 8]).read_unaligned() };
        if !store(ctx, off + i * 8, &chunk) {
            break;
        }
    }
    // Checked again on a value the optimiser cannot see through, so the
    // verifier gets the bound on the register it uses.
    let last = crate::verifier::opaque(len.wrapping_sub(8));
    let at = crate::verifier::opaque(from.wrapping_add(last));
    if last as usize > N - 8 || at as usize > N - 8 {
        return;
    }
    let chunk = unsafe { (p.add(at as usize) as *const [u8; 8]).read_unaligned() };
    let _ = store(ctx, off + last, &chunk);
}

/// Copies a rotated section of `len` bytes from `src` to frame offset
/// `off`: the RRset from the record at `split` to its end (`rrset`), then
/// from its start to `split`, then what follows the RRset (RRSIGs). The
/// records are the same even size, so the section's checksum holds.
#[inline(always)]
fn rotate_small<const N: usize>(
    ctx: &XdpContext,
    src: &[u8; N],
    (split, rrset): (u32, u32),
    len: u32,
    off: u32,
) {
    if split > rrset || rrset > len {
        return;
    }
    copy_section_at(ctx, src, split, rrset - split, off);
    copy_section_at(ctx, src, 0, split, off + rrset - split);
    copy_section_at(ctx, src, rrset, len - rrset, off + rrset);
}

/// [`rotate_small`] for a section in the block table, with three helper
/// calls; the compiler rotates only sections whose RRset and tail each
/// fit half a block (`rotation::fits_kernel`). (One `rotate` taking the
/// copy as a closure left a call behind whose frame took the call chain
/// past the verifier's 512-byte stack.)
#[inline(always)]
fn rotate_block(
    ctx: &XdpContext,
    src: &[u8; BLOCK_MAX],
    (split, rrset): (u32, u32),
    len: u32,
    off: u32,
) {
    if split > rrset || rrset > len {
        return;
    }
    store_half(ctx, off, src, split, rrset - split);
    store_half(ctx, off + rrset - split, src, 0, split);
    store_half(ctx, off + rrset, src, rrset, len - rrset);
}

/// Copies `len` bytes of `src` from `from` into the frame at `off` with
/// one helper call, when neither exceeds half of `src`: the verifier
/// bounds the source offset and the length apart, and their bounds'
/// sum must stay inside `src`.
#[inline(always)]
fn store_half<const N: usize>(ctx: &XdpContext, off: u32, src: &[u8; N], from: u32, len: u32) {
    let from = crate::verifier::opaque(from);
    let len = crate::verifier::opaque(len);
    if len == 0 || from as usize > N / 2 || len as usize > N / 2 {
        return;
    }
    unsafe {
        bpf_xdp_store_bytes(
            ctx.ctx,
            off,
            src.as_ptr().add(from as usize) as *mut core::ffi::c_void,
            len,
        );
    }
}

/// Most bytes a reply may grow at the head: XDP guarantees 256 bytes of
/// headroom, of which `bpf_xdp_adjust_head` keeps 40 for the kernel's
/// `struct xdp_frame`.
const HEAD_GROWTH_MAX: i32 = 216;
/// Most bytes kept when moving a query forward: headers with two VLAN
/// tags, IPv6, UDP, the DNS header and the longest question.
const KEEP_MAX: u32 = 14 + 8 + 40 + 8 + 12 + 255 + 4 + 3;

/// How a reply is formed besides its section: the [`form`] bits.
pub mod form {
    /// The reply's RCODE (the low four bits).
    pub const RCODE: u32 = 0xf;
    /// Slipped by rate limiting: TC=1, the question only (no section, no
    /// OPT), as `rrl::slipped` forms it in the fallback.
    pub const SLIP: u32 = 1 << 8;
    /// A negative answer: the section is the SOA template's record, in
    /// authority (`negative::build`).
    pub const NEGATIVE: u32 = 1 << 9;
    /// Not authoritative (a referral): a slipped reply has AA clear, as
    /// the fallback's copy of the referral's header has.
    pub const NOT_AUTHORITATIVE: u32 = 1 << 10;
}

#[inline(always)]
pub fn build(
    ctx: &XdpContext,
    s: &mut Scratch,
    pkt: &Packet,
    qn: &Question,
    ans: &Answer,
    cfg: &XdpConfig,
) -> Result<(), PassReason> {
    let alen = ans.section_len() as u32;
    if alen < 8 || alen > BLOCK_MAX as u32 {
        return Err(PassReason::Size);
    }
    // The section: inline, or in the mini-block, small-block or block
    // table.
    let (mini, small, block) = if alen as usize <= INLINE_MAX {
        (None, None, None)
    } else if alen as usize <= MINI_BLOCK_MAX {
        let b = unsafe { MINI_BLOCKS.get(&ans.block()) }.ok_or(PassReason::Miss)?;
        (Some(b), None, None)
    } else if alen as usize <= SMALL_BLOCK_MAX {
        let b = unsafe { SMALL_BLOCKS.get(&ans.block()) }.ok_or(PassReason::Miss)?;
        (None, Some(b), None)
    } else {
        let b = unsafe { BLOCKS.get(&ans.block()) }.ok_or(PassReason::Miss)?;
        (None, None, Some(b))
    };
    let opt_len = if qn.edns.present {
        edns::built_len(s)?
    } else {
        0
    };
    let question_len = qn.name_len + 4;
    let dns_len = DNS_HEADER_LEN as u32 + question_len + alen + opt_len;
    if dns_len > reply_limit(&qn.edns, cfg.udp_payload) {
        return Err(PassReason::Size);
    }
    let answer_off = pkt.dns + DNS_HEADER_LEN as u32 + question_len;
    resize(ctx, answer_off, pkt.dns + dns_len)?;

    // From here on nothing can fail: the frame is the reply's size.
    let id = u16::from_be_bytes([qn.header[0], qn.header[1]]);
    match (
        ans.rotation(id, rotation::record_len(qn.qtype)),
        mini,
        small,
        block,
    ) {
        (None, Some(b), _, _) => copy_section(ctx, &b.data, alen, answer_off),
        (None, _, Some(b), _) => copy_section(ctx, &b.data, alen, answer_off),
        // One helper call: a loop over a block this large costs the
        // verifier a state per step, each carried through the rest.
        (None, _, _, Some(b)) => store_bytes::<BLOCK_MAX, 0>(ctx, answer_off, &b.data, alen),
        (None, _, _, _) => copy_section(ctx, &ans.data, alen, answer_off),
        (Some(r), Some(b), _, _) => rotate_small(ctx, &b.data, r, alen, answer_off),
        (Some(r), _, Some(b), _) => rotate_small(ctx, &b.data, r, alen, answer_off),
        (Some(r), _, _, Some(b)) => rotate_block(ctx, &b.data, r, alen, answer_off),
        (Some(r), _, _, _) => rotate_small(ctx, &ans.data, r, alen, answer_off),
    }
    let mut sum = qn.sum + csum::at_parity(ans.csum as u16, question_len & 1 == 1);

    if qn.edns.present {
        let rel = DNS_HEADER_LEN as u32 + question_len + alen;
        sum += edns::write(ctx, s, opt_len, answer_off + alen, rel);
    }

    let mut header = qn.header;
    header[2] = 0x84 | (header[2] & 0x01); // QR, AA, RD copied; opcode 0
    header[3] &= 0x10; // CD copied; RA, Z, AD and RCODE zero
    // The query's ARCOUNT is its OPT record (one or none).
    let (nscount, arcount) = ans.more_counts();
    let arcount = arcount + u16::from_be_bytes([header[10], header[11]]);
    header[6..8].copy_from_slice(&ans.ancount().to_be_bytes());
    header[8..10].copy_from_slice(&nscount.to_be_bytes());
    header[10..12].copy_from_slice(&arcount.to_be_bytes());
    let _ = store(ctx, pkt.dns, &header);
    sum += csum::words(&header);
    finish(ctx, s, pkt, dns_len, sum);
    Ok(())
}

/// The slipped reply: the header with TC=1 and `rcode`, the question as
/// sent, nothing else.
#[inline(always)]
pub fn slip(
    ctx: &XdpContext,
    s: &mut Scratch,
    pkt: &Packet,
    qn: &Question,
    form: u32,
) -> Result<(), PassReason> {
    let question_len = qn.name_len + 4;
    let dns_len = DNS_HEADER_LEN as u32 + question_len;
    resize(ctx, pkt.dns + dns_len, pkt.dns + dns_len)?;
    let mut header = qn.header;
    let aa = match form & form::NOT_AUTHORITATIVE {
        0 => 0x04,
        _ => 0,
    };
    header[2] = 0x82 | aa | (header[2] & 0x01); // QR, AA, TC; RD copied
    header[3] = (header[3] & 0x10) | (form & form::RCODE) as u8;
    header[6..12].copy_from_slice(&[0; 6]);
    let _ = store(ctx, pkt.dns, &header);
    let sum = qn.sum + csum::words(&header);
    finish(ctx, s, pkt, dns_len, sum);
    Ok(())
}

/// Turns the headers below DNS into the reply's, for a DNS message of
/// `dns_len` bytes whose checksum contribution is `sum`: addresses and
/// ports swapped, lengths and checksums set.
#[inline(always)]
pub fn finish(ctx: &XdpContext, s: &mut Scratch, pkt: &Packet, dns_len: u32, mut sum: u64) {
    let udp_len = UDP_LEN + dns_len;
    let mut udp = pkt.udp;
    udp.swap(0, 2);
    udp.swap(1, 3);
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[6] = 0;
    udp[7] = 0;
    sum += csum::words(&udp) + udp_len as u64 + 17;

    if pkt.v6 {
        let v6 = &mut s.ip6;
        for i in 8..24 {
            v6.swap(i, i + 16);
        }
        v6[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        v6[7] = REPLY_HOP_LIMIT;
        sum += csum::words::<32>(v6[8..40].try_into().unwrap_or(&[0; 32]));
        let _ = store(ctx, pkt.l3, v6);
    } else {
        let v4 = &mut s.ip4;
        for i in 12..16 {
            v4.swap(i, i + 4);
        }
        v4[0] = 0x45; // options, if any, are dropped below
        v4[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        v4[8] = REPLY_HOP_LIMIT;
        v4[10] = 0;
        v4[11] = 0;
        let check = !csum::fold(csum::words(v4));
        v4[10..12].copy_from_slice(&check.to_be_bytes());
        sum += csum::words::<8>(v4[12..20].try_into().unwrap_or(&[0; 8]));
        let _ = store(ctx, pkt.l3, v4);
    }
    let check = match !csum::fold(sum) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&check.to_be_bytes());
    let _ = store(ctx, pkt.l4, &udp);

    // Ethernet: swap destination and source MACs (VLAN tags stay).
    if let Ok(eth) = load::<12>(ctx, 0) {
        let mut swapped = [0u8; 12];
        swapped[..6].copy_from_slice(&eth[6..12]);
        swapped[6..].copy_from_slice(&eth[..6]);
        let _ = store(ctx, 0, &swapped);
    }
    if !pkt.v6 && pkt.ip_options != 0 {
        drop_ip_options(ctx, pkt.l3 + 20, pkt.ip_options);
    }
}

/// Removes the `opts` bytes of IPv4 options that follow the first `keep`
/// bytes (Ethernet, VLAN tags, the fixed IPv4 header): moves those bytes
/// forward over the options and drops the front of the frame. Copies
/// eight bytes at a time from the end (the destination lies after the
/// source); the first eight are read before anything is written.
#[inline(always)]
fn drop_ip_options(ctx: &XdpContext, keep: u32, opts: u32) {
    if opts > 40 || keep < 8 || keep > 14 + 8 + 20 {
        return;
    }
    let Ok(first) = load::<8>(ctx, 0) else {
        return;
    };
    for i in 0..6u32 {
        let end = keep - 8 * i;
        if end <= 8 {
            break;
        }
        let Ok(chunk) = load::<8>(ctx, end - 8) else {
            break;
        };
        let _ = store(ctx, end - 8 + opts, &chunk);
    }
    let _ = store(ctx, opts, &first);
    unsafe { bpf_xdp_adjust_head(ctx.ctx, opts as i32) };
}

/// Copies `len` bytes of `src` from `FROM` into the frame at `off` with
/// one helper call (`len` is checked against what `src` holds there).
#[inline(always)]
pub fn store_bytes<const N: usize, const FROM: usize>(
    ctx: &XdpContext,
    off: u32,
    src: &[u8; N],
    len: u32,
) {
    let len = crate::verifier::opaque(len) & 0xfff;
    if len == 0 || len as usize > N - FROM {
        return;
    }
    unsafe {
        bpf_xdp_store_bytes(
            ctx.ctx,
            off,
            src.as_ptr().add(FROM) as *mut core::ffi::c_void,
            len,
        );
    }
}
