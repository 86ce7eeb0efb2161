//! The OPT record: reading the query's (DO bit, options) and writing the
//! reply's exactly as the fallback server does (`wire::reply_edns`):
//! root owner, our payload size, DO echoed, then NSID, then COOKIE.
//!
//! An option the fallback would act on in a way the kernel does not
//! (a malformed COOKIE, which gets FORMERR; a malformed ECS, which fails
//! the whole parse; repeated options) makes the query go up.

use aya_ebpf::helpers::bpf_ktime_get_coarse_ns;
use aya_ebpf::programs::XdpContext;
use xdpdns_common::cookie::{self, IpWords};
use xdpdns_common::{edns_option, nsid_mode, rtype, PassReason, XdpConfig, NSID_MAX};

use crate::csum;
use crate::headers::{be16, load, store};
use crate::parsed::{Edns, Packet, COOKIE_OPTION_LEN, OPT_REPLY_BUF, OPT_REPLY_MAX};
use crate::maps::Scratch;
use crate::verifier::launder;

use xdpdns_common::{OPT_LEN, OPT_MAX_OPTIONS as MAX_OPTIONS, OPT_RDATA_MAX};

/// Reads the OPT record at `at`, `len` bytes up to the end of the
/// message. Cookies go to scratch memory (the stack is too small).
#[inline(always)]
pub fn parse(ctx: &XdpContext, s: &mut Scratch, at: u32, len: u32) -> Result<Edns, PassReason> {
    if len < OPT_LEN || len > OPT_LEN + OPT_RDATA_MAX {
        return Err(PassReason::Edns);
    }
    let o: [u8; OPT_LEN as usize] = load(ctx, at)?;
    if o[0] != 0 || be16(&o, 1) != rtype::OPT {
        return Err(PassReason::ParseError);
    }
    // Extended RCODE and version 0 only (others get BADVERS upstairs).
    if o[5] != 0 || o[6] != 0 {
        return Err(PassReason::Edns);
    }
    let rdlen = be16(&o, 9) as u32;
    if rdlen != len - OPT_LEN {
        return Err(PassReason::ParseError);
    }
    // What the options say is kept in map memory while walking them, so
    // every path through the walk reaches the loop head (and its exits)
    // in the same verifier state; in registers, each combination of
    // options seen so far would be verified separately.
    s.seen = 0;
    let base = at + OPT_LEN;
    let mut pos = 0u32;
    for _ in 0..MAX_OPTIONS {
        let p = launder(s, pos);
        if p >= rdlen || p > OPT_RDATA_MAX {
            break;
        }
        if rdlen - p < 4 {
            return Err(PassReason::Edns);
        }
        let h: [u8; 4] = load(ctx, base + p)?;
        let code = be16(&h, 0);
        let olen = be16(&h, 2) as u32;
        if olen > rdlen - p - 4 {
            return Err(PassReason::Edns);
        }
        let data = base + p + 4;
        match code {
            edns_option::NSID => {
                let seen = launder_seen(s);
                if olen != 0 || seen & SEEN_NSID != 0 {
                    return Err(PassReason::Edns);
                }
                s.seen = seen | SEEN_NSID;
            }
            edns_option::COOKIE => {
                let malformed = olen < 8 || (olen > 8 && olen < 16) || olen > 40;
                let seen = launder_seen(s);
                if malformed || seen & (SEEN_CLIENT_COOKIE | SEEN_SERVER_COOKIE) != 0 {
                    return Err(PassReason::Edns);
                }
                s.client_cookie = load(ctx, data)?;
                if olen == 24 {
                    s.server_cookie = load(ctx, data + 8)?;
                    s.seen = seen | SEEN_SERVER_COOKIE;
                } else {
                    s.seen = seen | SEEN_CLIENT_COOKIE;
                }
            }
            edns_option::ECS => {
                // Ignored when well-formed, as the fallback does; what
                // its parser rejects goes up to be rejected there.
                if olen < 4 {
                    return Err(PassReason::Edns);
                }
                let h: [u8; 4] = load(ctx, data)?;
                let max = match be16(&h, 0) {
                    1 => 32,
                    2 => 128,
                    _ => return Err(PassReason::Edns),
                };
                let source = h[2] as u32;
                if source > max || olen < 4 + source.div_ceil(8) {
                    return Err(PassReason::Edns);
                }
            }
            // Padding, keepalive, unknown codes: ignored by both paths.
            _ => {}
        }
        pos = p + 4 + olen;
    }
    if launder(s, pos) != rdlen {
        return Err(PassReason::Edns);
    }
    let seen = launder_seen(s);
    Ok(Edns {
        present: true,
        payload: be16(&o, 3),
        dnssec_ok: o[7] & 0x80 != 0,
        nsid: seen & SEEN_NSID != 0,
        cookie: if seen & SEEN_SERVER_COOKIE != 0 {
            2
        } else if seen & SEEN_CLIENT_COOKIE != 0 {
            1
        } else {
            0
        },
    })
}

const SEEN_NSID: u32 = 1;
const SEEN_CLIENT_COOKIE: u32 = 2;
const SEEN_SERVER_COOKIE: u32 = 4;

#[inline(always)]
fn launder_seen(s: &mut Scratch) -> u32 {
    unsafe { core::ptr::read_volatile(&s.seen) }
}

/// Whether the kernel can answer `e` at all (checked before the lookup).
#[inline(always)]
pub fn answerable(e: &Edns, cfg: &XdpConfig) -> bool {
    !(e.nsid && cfg.nsid_mode == nsid_mode::PASS)
}

/// Records in `s` what `xdpdns_build_opt` needs besides the options:
/// the DO bit and, for a cookie, the client address and the unix second.
#[inline(always)]
pub fn prepare(s: &mut Scratch, pkt: &Packet, e: &Edns, cfg: &XdpConfig) {
    s.opt_dnssec_ok = e.dnssec_ok as u32;
    if e.cookie != 0 {
        let ns = unsafe { bpf_ktime_get_coarse_ns() }.wrapping_add(cfg.realtime_offset_ns);
        s.now = (ns / 1_000_000_000) as u32;
        if pkt.v6 {
            let src: [u8; 16] = s.ip6[8..24].try_into().unwrap_or([0; 16]);
            s.client_ip = src;
            s.client_v6 = 1;
        } else {
            let src: [u8; 4] = s.ip4[12..16].try_into().unwrap_or([0; 4]);
            s.client_ip[..4].copy_from_slice(&src);
            s.client_v6 = 0;
        }
    }
}

/// The length of the OPT record `xdpdns_build_opt` left in `s`, checked.
#[inline(always)]
pub fn built_len(s: &Scratch) -> Result<u32, PassReason> {
    let len = s.opt_len;
    if len < OPT_LEN || len > OPT_REPLY_MAX {
        return Err(PassReason::Edns);
    }
    Ok(len)
}

/// Copies the OPT record `prepare` built to frame offset `off`; `rel` is
/// the same position relative to the DNS message (the checksum parity).
/// Returns its checksum contribution.
#[inline(always)]
pub fn write(ctx: &XdpContext, s: &Scratch, len: u32, off: u32, rel: u32) -> u64 {
    let src = s.opt_reply.as_ptr() as *const [u8; 4];
    for i in 0..(OPT_REPLY_MAX / 4) {
        if i * 4 + 4 > len {
            break;
        }
        let chunk = unsafe { src.add(i as usize).read() };
        if !store(ctx, off + i * 4, &chunk) {
            break;
        }
    }
    // The last four bytes once more, ending exactly at the record's end:
    // covers a length that is not a multiple of four without one-byte
    // packet stores (which the verifier cannot prove).
    let last = len - 4;
    if last <= OPT_REPLY_MAX - 4 {
        let chunk =
            unsafe { (s.opt_reply.as_ptr().add(last as usize) as *const [u8; 4]).read_unaligned() };
        let _ = store(ctx, off + last, &chunk);
    }
    csum::at_parity(s.opt_sum as u16, rel & 1 == 1)
}

/// Builds the reply's OPT record in `s.opt_reply` (zero-padded) from what
/// `parse` recorded in `s`: root owner, our payload size, DO echoed, then
/// NSID, then COOKIE, as `wire::reply_edns` encodes it. Sets `s.opt_sum`
/// (at an even offset) and returns the length, 0 on a null pointer.
///
/// The cookie is the query's server cookie echoed while fresh and valid,
/// else a new one (`xdpdns_common::cookie::reply`, which the fallback
/// calls too). A global BPF function: the verifier checks it once, on its
/// own, rather than once for every path that reaches it (the SipHash
/// rounds times every combination of VLAN tags, families and options
/// would exceed its instruction budget).
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_build_opt(s: *mut Scratch, cfg: *const XdpConfig) -> u32 {
    let (Some(s), Some(cfg)) = (unsafe { s.as_mut() }, unsafe { cfg.as_ref() }) else {
        return 0;
    };
    let seen = s.seen;
    let nsid = seen & SEEN_NSID != 0 && cfg.nsid_mode == nsid_mode::INLINE;
    let nsid_total = if nsid {
        4 + (cfg.nsid_len as usize).min(NSID_MAX)
    } else {
        0
    };
    let cookie_kind = if seen & SEEN_SERVER_COOKIE != 0 {
        2
    } else if seen & SEEN_CLIENT_COOKIE != 0 {
        1
    } else {
        0
    };
    let cookie_total = if cookie_kind != 0 {
        COOKIE_OPTION_LEN as usize
    } else {
        0
    };
    let rdlen = (nsid_total + cookie_total) as u16;
    // Word stores throughout (volatile, so LLVM keeps them as such): as
    // `memset`/`memcpy` calls they become byte loops the verifier walks
    // byte by byte.
    let words = s.opt_reply.as_mut_ptr() as *mut u64;
    for i in 0..OPT_REPLY_BUF / 8 {
        unsafe { core::ptr::write_volatile(words.add(i), 0) };
    }
    let [hi, lo] = cfg.udp_payload.to_be_bytes();
    let [rd_hi, rd_lo] = rdlen.to_be_bytes();
    let flags = if s.opt_dnssec_ok != 0 { 0x80 } else { 0 };
    unsafe {
        let p = s.opt_reply.as_mut_ptr();
        core::ptr::write_volatile(
            p as *mut u64,
            u64::from_le_bytes([0, 0, 41, hi, lo, 0, 0, flags]),
        );
        core::ptr::write_volatile(
            p.add(8) as *mut u32,
            u32::from_le_bytes([0, rd_hi, rd_lo, 0]),
        );
    }
    let mut at = OPT_LEN as usize;
    if nsid {
        // Whole words: the configured option is zero-padded past its end.
        let src = cfg.nsid.as_ptr() as *const u32;
        for i in 0..(NSID_MAX + 4) / 4 {
            if i * 4 >= nsid_total {
                break;
            }
            unsafe {
                let w = src.add(i).read_unaligned();
                core::ptr::write_volatile(s.opt_reply.as_mut_ptr().add(at + i * 4) as *mut u32, w);
            }
        }
        at += nsid_total;
    }
    if cookie_kind != 0 && at + COOKIE_OPTION_LEN as usize <= OPT_REPLY_BUF {
        // Words throughout: byte arrays would not fit the stack left
        // over by the caller.
        let ip = unsafe {
            let p = s.client_ip.as_ptr();
            if s.client_v6 != 0 {
                IpWords::V6(
                    (p as *const u64).read_unaligned(),
                    (p.add(8) as *const u64).read_unaligned(),
                )
            } else {
                IpWords::V4((p as *const u32).read_unaligned())
            }
        };
        let client = unsafe { (s.client_cookie.as_ptr() as *const u64).read_unaligned() };
        let received = if cookie_kind == 2 {
            cookie::received_words(&s.server_cookie)
        } else {
            None
        };
        let v = cookie::reply_words(
            &cfg.cookie_keys,
            cfg.cookie_previous != 0,
            client,
            received,
            s.now,
            ip,
        );
        s.cookie_valid = v.valid as u32;
        let head = u32::from_le_bytes([0, edns_option::COOKIE as u8, 0, 24]);
        unsafe {
            let p = s.opt_reply.as_mut_ptr().add(at);
            (p as *mut u32).write_unaligned(head);
            (p.add(4) as *mut u64).write_unaligned(client);
            (p.add(12) as *mut u32).write_unaligned(cookie::VERSION as u32);
            (p.add(16) as *mut u32).write_unaligned(v.timestamp.to_be());
            (p.add(20) as *mut u64).write_unaligned(v.hash);
        }
        at += COOKIE_OPTION_LEN as usize;
    }
    s.opt_sum = csum::fold(csum::words(&s.opt_reply)) as u32;
    at as u32
}

