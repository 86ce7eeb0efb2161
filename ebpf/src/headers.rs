//! Ethernet (with up to two VLAN tags), IPv4/IPv6 and UDP: where the DNS
//! message starts and whether it is for us. Nothing is written here.

use aya_ebpf::programs::XdpContext;
use xdpdns_common::PassReason;

use crate::maps::{Scratch, ADDRESSES};
use crate::parsed::{Packet, UDP_LEN};

const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const IPPROTO_UDP: u8 = 17;
pub const ETH_LEN: u32 = 14;
pub const IPV4_LEN: u32 = 20;
pub const IPV6_LEN: u32 = 40;

/// Offsets into frames we handle are far below 8 KiB; the mask gives the
/// verifier a bound it can see (it loses track through 32-bit sums).
#[inline(always)]
fn bounded(off: u32) -> usize {
    (crate::verifier::opaque(off) & 0x1fff) as usize
}

/// Copies `N` bytes at `off` out of the frame by direct packet access (a
/// helper call costs more than the whole copy).
#[inline(always)]
pub fn load<const N: usize>(ctx: &XdpContext, off: u32) -> Result<[u8; N], PassReason> {
    let at = ctx.data() + bounded(off);
    if at + N > ctx.data_end() {
        return Err(PassReason::ParseError);
    }
    Ok(unsafe { core::ptr::read_unaligned(at as *const [u8; N]) })
}

/// Writes `bytes` at `off` by direct packet access; the caller has sized
/// the frame, so the bounds check only satisfies the verifier. Returns
/// false if it did not fit, so loops can stop (a loop that carried on
/// would give the verifier two paths per step).
#[inline(always)]
pub fn store<const N: usize>(ctx: &XdpContext, off: u32, bytes: &[u8; N]) -> bool {
    let at = ctx.data() + bounded(off);
    if at + N > ctx.data_end() {
        return false;
    }
    unsafe { core::ptr::write_unaligned(at as *mut [u8; N], *bytes) };
    true
}

#[inline(always)]
pub fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

/// Copies `N` bytes at `off` into `dst` (map memory: the stack is too
/// small to hold every header).
#[inline(always)]
pub fn load_into<const N: usize>(
    ctx: &XdpContext,
    off: u32,
    dst: &mut [u8; N],
) -> Result<(), PassReason> {
    let at = ctx.data() + bounded(off);
    if at + N > ctx.data_end() {
        return Err(PassReason::ParseError);
    }
    unsafe { core::ptr::copy_nonoverlapping(at as *const u8, dst.as_mut_ptr(), N) };
    Ok(())
}

/// The loopback interface is ifindex 1 in every network namespace.
#[inline(always)]
fn on_loopback(ctx: &XdpContext) -> bool {
    // SAFETY: `ctx.ctx` is the xdp_md the kernel passed in.
    unsafe { (*ctx.ctx).ingress_ifindex == 1 }
}

/// Parses down to the DNS payload of a UDP datagram to `port`.
#[inline(always)]
pub fn parse(
    ctx: &XdpContext,
    port: u16,
    filter_destination: bool,
    s: &mut Scratch,
) -> Result<Packet, PassReason> {
    let frame_len = (ctx.data_end() - ctx.data()) as u32;
    let eth: [u8; ETH_LEN as usize] = load(ctx, 0).map_err(|_| PassReason::NotDns)?;
    // A group (multicast/broadcast) source MAC: the reply would go to
    // every host on the segment.
    if eth[6] & 1 != 0 {
        return Err(PassReason::Source);
    }
    let mut ethertype = be16(&eth, 12);
    let mut l3 = ETH_LEN;
    for _ in 0..2 {
        if ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
            let tag: [u8; 4] = load(ctx, l3).map_err(|_| PassReason::NotDns)?;
            ethertype = be16(&tag, 2);
            l3 += 4;
        }
    }
    let (v6, l4, ip_payload, ip_options) = match ethertype {
        ETH_P_IP => {
            let h = &mut s.ip4;
            load_into(ctx, l3, h).map_err(|_| PassReason::NotDns)?;
            // Options are allowed: the reply goes without them.
            let header_len = (h[0] & 0x0f) as u32 * 4;
            if h[0] >> 4 != 4 || header_len < IPV4_LEN || h[9] != IPPROTO_UDP {
                return Err(PassReason::NotDns);
            }
            // More-fragments flag or a fragment offset: not ours to answer.
            if be16(h, 6) & 0x3fff != 0 {
                return Err(PassReason::NotDns);
            }
            let total = be16(h, 2) as u32;
            if total < header_len + UDP_LEN || l3 + total > frame_len {
                return Err(PassReason::ParseError);
            }
            // Sources no reply may go to: 0/8, multicast, reserved and
            // broadcast (224/3), and loopback from outside `lo`.
            let first = h[12];
            if first == 0 || first >= 224 || (first == 127 && !on_loopback(ctx)) {
                return Err(PassReason::Source);
            }
            (
                false,
                l3 + header_len,
                total - header_len,
                header_len - IPV4_LEN,
            )
        }
        ETH_P_IPV6 => {
            let h = &mut s.ip6;
            load_into(ctx, l3, h).map_err(|_| PassReason::NotDns)?;
            // Next header must be UDP itself: extension headers are passed.
            if h[0] >> 4 != 6 || h[6] != IPPROTO_UDP {
                return Err(PassReason::NotDns);
            }
            let payload = be16(h, 4) as u32;
            if payload < UDP_LEN || l3 + IPV6_LEN + payload > frame_len {
                return Err(PassReason::ParseError);
            }
            // Multicast (ff00::/8), unspecified and loopback sources.
            let src = h.as_ptr();
            let (hi, lo) = unsafe {
                (
                    (src.add(8) as *const u64).read_unaligned(),
                    (src.add(16) as *const u64).read_unaligned(),
                )
            };
            // An IPv4-mapped source (::ffff:0:0/96) never belongs on the
            // wire, and the fallback would see it as IPv4 (its cookie).
            let lo = u64::from_be(lo);
            if h[8] == 0xff || (hi == 0 && (lo <= 1 || lo >> 32 == 0xffff)) {
                return Err(PassReason::Source);
            }
            (true, l3 + IPV6_LEN, payload, 0)
        }
        _ => return Err(PassReason::NotDns),
    };
    let udp: [u8; UDP_LEN as usize] = load(ctx, l4).map_err(|_| PassReason::NotDns)?;
    if port == 0 || be16(&udp, 2) != port {
        return Err(PassReason::NotDns);
    }
    let udp_len = be16(&udp, 4) as u32;
    if udp_len != ip_payload {
        return Err(PassReason::ParseError);
    }
    if filter_destination {
        // Only the addresses xdpdns serves on this interface.
        let key = &mut s.address;
        if v6 {
            key.copy_from_slice(&s.ip6[24..40]);
        } else {
            *key = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0];
            key[12..].copy_from_slice(&s.ip4[16..20]);
        }
        if unsafe { ADDRESSES.get(&s.address) }.is_none() {
            return Err(PassReason::Destination);
        }
    }
    Ok(Packet {
        l3,
        v6,
        l4,
        ip_options,
        udp,
        dns: l4 + UDP_LEN,
        dns_len: udp_len - UDP_LEN,
    })
}
