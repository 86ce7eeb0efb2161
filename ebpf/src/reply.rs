//! Turns the query frame into the reply in place. Called only after every
//! check has passed; the one step that can fail (growing the frame) comes
//! first, so a failure leaves the frame unchanged.

use aya_ebpf::helpers::bpf_xdp_adjust_tail;
use aya_ebpf::programs::XdpContext;
use xdpdns_common::{
    Answer, PassReason, XdpConfig, ANSWER_MAX, CLASSIC_UDP_PAYLOAD, DNS_HEADER_LEN,
};

use crate::csum;
use crate::edns::{self, Edns};
use crate::headers::{load, store, Packet, UDP_LEN};
use crate::maps::Scratch;
use crate::question::Question;

const REPLY_HOP_LIMIT: u8 = 64;

/// Largest reply the client accepts: 512 without EDNS, else its size
/// capped by ours, never below 512 (the fallback's rule).
#[inline(always)]
fn reply_limit(e: &Edns, ours: u16) -> u32 {
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

#[inline(always)]
pub fn build(
    ctx: &XdpContext,
    s: &mut Scratch,
    pkt: &Packet,
    qn: &Question,
    ans: &Answer,
    cfg: &XdpConfig,
) -> Result<(), PassReason> {
    let alen = ans.len as u32;
    if alen == 0 || alen > ANSWER_MAX as u32 || alen % 4 != 0 {
        return Err(PassReason::Size);
    }
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
    let mut eth: [u8; 12] = load(ctx, 0)?;
    let frame_len = (ctx.data_end() - ctx.data()) as i32;
    let delta = (pkt.dns + dns_len) as i32 - frame_len;
    if delta != 0 && unsafe { bpf_xdp_adjust_tail(ctx.ctx, delta) } != 0 {
        return Err(PassReason::Size);
    }

    // From here on nothing can fail: the frame is the reply's size.
    let answer_off = pkt.dns + DNS_HEADER_LEN as u32 + question_len;
    // Answer records, four bytes at a time (records are 16 or 28 bytes).
    let src = ans.data.as_ptr() as *const [u8; 4];
    for i in 0..(ANSWER_MAX / 4) as u32 {
        if i * 4 >= alen {
            break;
        }
        let chunk = unsafe { src.add(i as usize).read() };
        if !store(ctx, answer_off + i * 4, &chunk) {
            break;
        }
    }
    let mut sum = qn.sum + csum::at_parity(ans.csum as u16, question_len & 1 == 1);

    if qn.edns.present {
        let rel = DNS_HEADER_LEN as u32 + question_len + alen;
        sum += edns::write(ctx, s, opt_len, answer_off + alen, rel);
    }

    let mut header = qn.header;
    header[2] = 0x84 | (header[2] & 0x01); // QR, AA, RD copied; opcode 0
    header[3] &= 0x10; // CD copied; RA, Z, AD and RCODE zero
    header[6..8].copy_from_slice(&ans.ancount.to_be_bytes());
    let _ = store(ctx, pkt.dns, &header);
    sum += csum::words(&header);

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
    let mut swapped = [0u8; 12];
    swapped[..6].copy_from_slice(&eth[6..12]);
    swapped[6..].copy_from_slice(&eth[..6]);
    eth = swapped;
    let _ = store(ctx, 0, &eth);
    Ok(())
}
