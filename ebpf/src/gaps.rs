//! DNSSEC NXDOMAIN: which gap of its closest encloser's children a name
//! that does not exist falls in (`xdpdns_common::gaps`). The encloser's
//! list is searched by halves, one entry per step, the labels compared
//! in canonical order (lower-cased octets, a prefix first) eight bytes
//! at a time.

use aya_ebpf::bindings::xdp_md;
use aya_ebpf::helpers::bpf_xdp_load_bytes;
use aya_ebpf::programs::XdpContext;
use xdpdns_common::gaps::{
    key_label, KEY_LABEL_LEN, LABEL_AT, LABEL_LEN_AT, RECORDS_LEN_AT, TEMPLATE_AT,
};
use xdpdns_common::negative::template_at;
use xdpdns_common::{
    qtype_slot, Answer, AnswerBlock, PassReason, XdpConfig, DNS_HEADER_LEN, MAX_LABEL_LEN,
    SHORT_NAME_MAX, SMALL_BLOCK_MAX, TINY_NAME_MAX,
};

use crate::headers::load;
use crate::lookup::lookup;
use crate::maps::{tail, Scratch, BLOCKS};
use crate::question::lower8;
use crate::verdict::code_of;

/// Steps of the search: a list holds at most `CHILDREN_MAX + 1` = 257
/// entries.
const STEPS: usize = 9;
const _: () = assert!(xdpdns_common::gaps::CHILDREN_MAX < 1 << STEPS);

/// Writes the label of entry `k` before the encloser's name in the key
/// buffer for `key_len` bytes.
#[inline(always)]
fn set_index(s: &mut Scratch, key_len: u32, k: u32) {
    let label = key_label(k as u16);
    let key = if key_len as usize <= TINY_NAME_MAX {
        &mut s.tiny.key.name[..KEY_LABEL_LEN]
    } else if key_len as usize <= SHORT_NAME_MAX {
        &mut s.short.key.name[..KEY_LABEL_LEN]
    } else {
        &mut s.long.key.name[..KEY_LABEL_LEN]
    };
    key.copy_from_slice(&label);
}

/// Entry `k` of the list whose encloser's name is in the key buffer for
/// `key_len` bytes, from byte 3 on.
#[inline(always)]
fn entry(s: &mut Scratch, key_len: u32, k: u32, overlay: u32) -> Option<(&'static Answer, &'static AnswerBlock)> {
    set_index(s, key_len, k);
    let e = lookup(s, key_len, qtype_slot::GAP_SIGNED, overlay)?;
    if (e.section_len() as usize) <= SMALL_BLOCK_MAX {
        return None;
    }
    let b = unsafe { BLOCKS.get(&e.block()) }?;
    Some((e, b))
}

/// Compares entry `k`'s label with the query's: 0 when it sorts before
/// it, 1 when not, 2 when the entry is missing.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_gap_probe(s: *mut Scratch, key_len: u32, k: u32, overlay: u32) -> u32 {
    let Some(s) = (unsafe { s.as_mut() }) else {
        return 2;
    };
    let Some((_, b)) = entry(s, key_len, k, overlay) else {
        return 2;
    };
    for w in 0..8 {
        let at = LABEL_AT + 8 * w;
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&b.data[at..at + 8]);
        let theirs = u64::from_be_bytes(bytes);
        let ours = u64::from_be(s.gap_label[w]);
        if theirs != ours {
            return (theirs > ours) as u32;
        }
    }
    // Equal up to the padding: the shorter sorts first.
    (b.data[LABEL_LEN_AT] as u32 >= s.gap_label_len) as u32
}

/// Finds the gap entry for the query `xdpdns_negative` left in `s` (an
/// NXDOMAIN below a signed encloser): loads the query's label below the
/// encloser, puts the encloser's name in the key buffer and searches
/// the list; `s.gap_found` is the last entry whose label sorts before
/// the query's. 0, or a [`PassReason`] plus one.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xdpdns_gap_search(ctx: *mut xdp_md, s: *mut Scratch, cfg: *const XdpConfig) -> u32 {
    let (Some(s), Some(cfg)) = (unsafe { s.as_mut() }, unsafe { cfg.as_ref() }) else {
        return code_of(Err(PassReason::ParseError));
    };
    let ctx = XdpContext::new(ctx);
    code_of(search(&ctx, s, cfg.overlay))
}

#[inline(always)]
fn search(ctx: &XdpContext, s: &mut Scratch, overlay: u32) -> Result<(), PassReason> {
    let qstart = s.pkt.dns + DNS_HEADER_LEN as u32;
    let at = qstart + (s.gap_label_at & 0xff);
    let [len, _] = load::<2>(ctx, at)?;
    let len = crate::verifier::opaque(len as u32) & 0x3f;
    if len == 0 || len as usize > MAX_LABEL_LEN {
        return Err(PassReason::Miss);
    }
    s.gap_label = [0; 8];
    let dst = s.gap_label.as_mut_ptr() as *mut core::ffi::c_void;
    if unsafe { bpf_xdp_load_bytes(ctx.ctx, at + 1, dst, len) } != 0 {
        return Err(PassReason::Miss);
    }
    for w in 0..8 {
        s.gap_label[w] = lower8(s.gap_label[w]);
    }
    s.gap_label_len = len;
    let key_len = encloser_key(ctx, s)?;
    let count = s.gap_count;
    if count == 0 || count as usize > xdpdns_common::gaps::CHILDREN_MAX + 1 {
        return Err(PassReason::Miss);
    }
    let (mut lo, mut hi) = (0u32, count - 1);
    for _ in 0..STEPS {
        if lo >= hi {
            break;
        }
        let mid = (lo + hi + 1) / 2;
        match xdpdns_gap_probe(s, key_len, mid, overlay) {
            0 => lo = mid,
            1 => hi = mid - 1,
            _ => return Err(PassReason::Miss),
        }
    }
    s.gap_found = lo;
    let (e, b) = entry(s, key_len, lo, overlay).ok_or(PassReason::Miss)?;
    s.tail_kind = tail::GAP;
    s.tail_block = e.block();
    s.tail_csum = e.csum as u32;
    s.tail_len = u16::from_le_bytes([b.data[RECORDS_LEN_AT], b.data[RECORDS_LEN_AT + 1]]) as u32;
    s.tail_count = b.data[TEMPLATE_AT + template_at::AUTHORITY] as u32;
    // The reply finds the zone's template by the apex's key, in a buffer
    // the search may have used.
    let zone_len = s.neg_zone_len;
    if zone_len < 2 || zone_len > s.qn.name_len {
        return Err(PassReason::Miss);
    }
    let apex_at = s.pkt.dns + DNS_HEADER_LEN as u32 + (s.qn.name_len - zone_len);
    crate::keybuf::copy_suffix(ctx, s, apex_at, zone_len)
}

/// Copies the closest encloser's name (the query name's last
/// `s.gap_encloser_len` bytes) into the key buffer of its gap entries;
/// returns their keys' length.
#[inline(always)]
fn encloser_key(ctx: &XdpContext, s: &mut Scratch) -> Result<u32, PassReason> {
    let n = s.qn.name_len;
    let e_len = s.gap_encloser_len;
    if e_len < 2 || e_len >= n || n > 255 {
        return Err(PassReason::Miss);
    }
    let at = s.pkt.dns + DNS_HEADER_LEN as u32 + (n - e_len);
    match crate::keybuf::xdpdns_copy_suffix(ctx.ctx, s, at, e_len, KEY_LABEL_LEN as u32) {
        0 => Ok(e_len + KEY_LABEL_LEN as u32),
        _ => Err(PassReason::Miss),
    }
}
