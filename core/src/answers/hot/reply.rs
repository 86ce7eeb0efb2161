//! The hot answer: a query answered from the compiled table by
//! copying bytes, the way the XDP program answers it (`ebpf/src/question.rs`,
//! `edns.rs`, `reply.rs`): the same conditions, the same reply. Anything
//! else returns `None` and goes to the full handler, which stays the
//! reference (the differential tests in `tests.rs` compare the two).

use std::cell::Cell;
use std::net::IpAddr;

use hickory_proto::rr::LowerName;
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};

use xdpdns_common::cookie::{self, ClientIp};
use xdpdns_common::negative::{exist_flags, Template, EXIST_HEAD, EXIST_TYPES_MAX, TEMPLATE_LEN};
use xdpdns_common::{
    answer_flags, edns_option, plain_type, qtype_slot, rotation, rtype, CLASSIC_UDP_PAYLOAD,
    DNS_HEADER_LEN, MAX_NAME_WIRE_LEN, NSID_MAX,
};

use crate::answers::negative;
use crate::answers::negative::entries::relocated;
use crate::answers::table::{AnswerTable, HotEntry, View};
use crate::handler::Transport;
use crate::wire::ServerEdns;
use crate::zone::{Snapshot, Zone};

/// The OPT limits the kernel parses with, as lengths here.
const OPT_LEN: usize = xdpdns_common::OPT_LEN as usize;
const OPT_RDATA_MAX: usize = xdpdns_common::OPT_RDATA_MAX as usize;
const MAX_OPTIONS: usize = xdpdns_common::OPT_MAX_OPTIONS;

/// The COOKIE option as the query carried it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cookie {
    Absent,
    Client([u8; 8]),
    /// A client cookie and a server cookie of our construction's length.
    Both([u8; 8], [u8; 16]),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Edns {
    payload: u16,
    dnssec_ok: bool,
    nsid: bool,
    cookie: Cookie,
}

/// What the reply needs from the query.
struct Question {
    /// Bytes of the question section (name, type, class) as sent.
    end: usize,
    /// The name, lower-cased, in wire form.
    lower: [u8; MAX_NAME_WIRE_LEN],
    name_len: usize,
    qtype: u16,
    edns: Option<Edns>,
}

/// A hot reply.
#[derive(Debug)]
pub struct Answered {
    pub bytes: Vec<u8>,
    /// The answering zone's id (for the per-zone counters).
    pub zone: u32,
    /// The query carried a valid server cookie (rate limiting exempts it).
    pub valid_cookie: bool,
}

/// The reply to `packet` from `table` and `snapshot` (the one being
/// served), or `None` when the full handler must answer.
pub fn answer(
    table: &AnswerTable,
    snapshot: &Snapshot,
    packet: &[u8],
    transport: Transport,
    peer: IpAddr,
    now: u64,
    server: &ServerEdns,
) -> Option<Answered> {
    let valid_cookie = Cell::new(false);
    let (bytes, zone) = compose(
        table,
        snapshot,
        packet,
        transport,
        (peer, now, &valid_cookie),
        server,
    )?;
    Some(Answered {
        bytes,
        zone,
        valid_cookie: valid_cookie.get(),
    })
}

/// [`answer`]'s bytes and zone; the cookie's validity goes to the cell.
fn compose(
    table: &AnswerTable,
    snapshot: &Snapshot,
    packet: &[u8],
    transport: Transport,
    (peer, now, valid_cookie): (IpAddr, u64, &Cell<bool>),
    server: &ServerEdns,
) -> Option<(Vec<u8>, u32)> {
    let q = parse(packet)?;
    let view = table.view(snapshot)?;
    if !view.admits(&q.lower[..q.name_len]) {
        return None;
    }
    let reply = compose_from(
        &view,
        snapshot,
        &q,
        packet,
        transport,
        (peer, now, valid_cookie),
        server,
    );
    // (A read that could not compile what it asked for may have made a
    // missing entry of it: the full handler answers.)
    reply.filter(|_| !view.failed())
}

/// [`compose`] from the entries of `view`.
fn compose_from(
    view: &View<'_>,
    snapshot: &Snapshot,
    q: &Question,
    packet: &[u8],
    transport: Transport,
    (peer, now, valid_cookie): (IpAddr, u64, &Cell<bool>),
    server: &ServerEdns,
) -> Option<(Vec<u8>, u32)> {
    if q.edns.is_some_and(|e| e.nsid) && server.nsid.as_ref().is_some_and(|n| n.len() > NSID_MAX) {
        return None;
    }
    let limit = match (transport, q.edns) {
        (Transport::Tcp, _) => u16::MAX as usize,
        (Transport::Udp, None) => CLASSIC_UDP_PAYLOAD as usize,
        (Transport::Udp, Some(e)) => {
            e.payload.min(server.udp_payload).max(CLASSIC_UDP_PAYLOAD) as usize
        }
    };
    let reply = Reply {
        packet,
        q,
        limit,
        peer,
        now,
        server,
        valid_cookie,
    };
    let name = &q.lower[..q.name_len];
    let dnssec_ok = q.edns.is_some_and(|e| e.dnssec_ok);
    if let Some(slot) = table_slot(q.qtype) {
        let id = u16::from_be_bytes([packet[0], packet[1]]);
        let build = |entry: &HotEntry<'_>| {
            // NODATA after a CNAME chain: the kernel finds the zone's SOA
            // template by the apex at the end of the name.
            let soa_zone = match entry.soa_after() {
                None => None,
                Some(apex_len) => Some(zone_at_end(snapshot, name, apex_len as usize)?),
            };
            let (nscount, arcount) = entry.more_counts();
            let head = Head {
                authoritative: true,
                rcode: 0,
                ancount: entry.ancount(),
                nscount,
                arcount,
            };
            let section = entry.section;
            let rotation = entry.rotation(id, rotation::record_len(slot));
            let qname = &packet[DNS_HEADER_LEN..DNS_HEADER_LEN + q.name_len];
            let soa_len = soa_zone.map_or(0, |_| SOA_LEN_GUESS);
            reply
                .write(head, section.len() + soa_len, |out| {
                    write_section(out, section, rotation);
                    if let Some(zone) = soa_zone {
                        negative::write_soa(out, qname, zone);
                    }
                })
                .map(|bytes| (bytes, entry.zone()))
        };
        // Under DO=1 a signed zone's entry answers from its signed
        // variant (the full handler answers when there is none).
        let plain = view.read(name, slot, |entry| {
            let signed = entry.flags() & answer_flags::SIGNED != 0 && dnssec_ok;
            (!signed).then(|| build(entry))
        });
        match plain {
            Some(Some(hit)) => return hit,
            Some(None) => return view.read(name, slot | qtype_slot::SIGNED, build)?,
            // No entry, or the table is not at this snapshot: the
            // snapshot decides whether the name or type is missing.
            None => {}
        }
    }
    if let Some(r) = referral(view, name, q.qtype, dnssec_ok) {
        let head = Head {
            authoritative: false,
            rcode: 0,
            ancount: 0,
            nscount: r.authority,
            arcount: r.additional,
        };
        let records = relocated(&r.section, q.name_len, 0);
        let bytes = reply.write(head, records.len(), |out| out.extend_from_slice(&records))?;
        return Some((bytes, r.zone));
    }
    // The table's EXIST entries and SOA template decide most negatives
    // with a lookup or three, as the kernel does; the snapshot decides
    // the rest (deeper names, and while the table catches up).
    if let Some(n) = negative_from_table(view, name, q.qtype, dnssec_ok) {
        let head = Head {
            authoritative: true,
            rcode: n.rcode,
            ancount: 0,
            nscount: 1,
            arcount: 0,
        };
        let records = relocated(&n.template, q.name_len, 0);
        let bytes = reply.write(head, records.len(), |out| out.extend_from_slice(&records))?;
        return Some((bytes, n.zone));
    }
    let (zone, negative) = negative::decide(snapshot, name, q.qtype, dnssec_ok)?;
    let head = Head {
        authoritative: true,
        rcode: negative.rcode(),
        ancount: 0,
        nscount: 1,
        arcount: 0,
    };
    let qname = &packet[DNS_HEADER_LEN..DNS_HEADER_LEN + q.name_len];
    let bytes = reply.write(head, SOA_LEN_GUESS, |out| {
        negative::write_soa(out, qname, zone)
    })?;
    Some((bytes, snapshot.zone_id(zone.origin_key())))
}

/// A delegation's referral template, as the kernel finds it.
struct Referral {
    section: Vec<u8>,
    authority: u16,
    additional: u16,
    zone: u32,
}

/// The referral the kernel sends for `name` (lower-cased wire form) and
/// `qtype`, from the same entries: the name's EXIST entry marked
/// REFERRAL (a query at the cut, but for DS), or, when the name has none,
/// that of the name one or two labels up; none in a signed zone under
/// DO=1.
fn referral(view: &View<'_>, name: &[u8], qtype: u16, dnssec_ok: bool) -> Option<Referral> {
    if !plain_type(qtype) && qtype != rtype::DS {
        return None;
    }
    let exist = |at: &[u8]| {
        exist_facts(view, at, |facts, signed| {
            Some((facts.get(1).copied().unwrap_or(0), signed))
        })
    };
    let mut cut = name;
    let (flags, signed) = match exist(name) {
        Some(found) if qtype != rtype::DS => found,
        Some(_) => return None,
        None => {
            let mut found = None;
            for _ in 0..2 {
                let len = *cut.first()? as usize;
                cut = cut.get(1 + len..)?;
                if cut.len() < 2 {
                    return None;
                }
                if let Some(f) = exist(cut) {
                    found = Some(f);
                    break;
                }
            }
            found?
        }
    };
    if flags & exist_flags::REFERRAL == 0 || (signed && dnssec_ok) {
        return None;
    }
    view.read(cut, qtype_slot::REFERRAL, |e| {
        let head: &[u8; TEMPLATE_LEN] = e.section.get(..TEMPLATE_LEN)?.try_into().ok()?;
        let t = Template::from_bytes(head);
        Some(Referral {
            section: e.section.to_vec(),
            authority: t.authority.into(),
            additional: t.additional.into(),
            zone: e.zone(),
        })
    })?
}

/// Calls `f` with the facts the kernel reads for `name` (lower-cased wire
/// form): its EXIST entry's section or the facts folded into its A entry,
/// and whether it is in a signed zone; `None` when it has neither (it
/// does not exist) or the table is not at the snapshot.
fn exist_facts<R>(view: &View<'_>, name: &[u8], f: impl Fn(&[u8], bool) -> Option<R>) -> Option<R> {
    let signed = |e: &HotEntry<'_>| e.flags() & answer_flags::SIGNED != 0;
    match view.read(name, qtype_slot::EXIST, |e| f(e.section, signed(e))) {
        Some(found) => found,
        None => view
            .read(name, qtype_slot::A, |e| f(e.folded_exist()?, signed(e)))
            .flatten(),
    }
}

/// A negative answer the table's entries decide: its RCODE, the zone's
/// SOA template and the zone's id.
struct TableNegative {
    rcode: u8,
    template: Vec<u8>,
    zone: u32,
}

/// What an EXIST entry says, read as the kernel reads it.
struct ExistRead {
    flags: u8,
    signed: bool,
    zone_len: usize,
    /// The entry lists the query's type.
    listed: bool,
}

/// NXDOMAIN or NODATA for `name` (lower-cased wire form) and `qtype`
/// exactly as the kernel decides it from the EXIST entries
/// (`ebpf/src/negative.rs`): the name's own entry, or an ENCLOSER one or
/// two labels up, the MNAME/RNAME label check at the apex, none in a
/// signed zone under DO=1.
fn negative_from_table(
    view: &View<'_>,
    name: &[u8],
    qtype: u16,
    dnssec_ok: bool,
) -> Option<TableNegative> {
    let ds = qtype == rtype::DS;
    if !plain_type(qtype) && !ds {
        return None;
    }
    let listed_type = match qtype {
        rtype::A | rtype::AAAA | rtype::DS => 0,
        t => t,
    };
    let exist = |at: &[u8], qtype: u16| {
        exist_facts(view, at, |d, signed| {
            let count = if qtype == 0 { 0 } else { *d.get(2)? as usize };
            let listed = (0..count.min(EXIST_TYPES_MAX)).any(|i| {
                let at = EXIST_HEAD + 2 * i;
                d.get(at..at + 2)
                    .is_some_and(|t| u16::from_le_bytes([t[0], t[1]]) == qtype)
            });
            Some(ExistRead {
                flags: *d.get(1)?,
                signed,
                zone_len: *d.first()? as usize,
                listed,
            })
        })
    };
    let nodata_bit = match qtype {
        rtype::A => exist_flags::NODATA_A,
        rtype::AAAA => exist_flags::NODATA_AAAA,
        rtype::DS => exist_flags::NODATA_DS,
        _ => exist_flags::NODATA_OTHER,
    };
    let (rcode, e) = match exist(name, listed_type) {
        Some(e) => {
            let referral = e.flags & exist_flags::REFERRAL != 0 && !ds;
            if referral || e.flags & nodata_bit == 0 || e.listed {
                return None;
            }
            (0, e)
        }
        None => {
            let (mut label, mut found) = (0, None);
            for _ in 0..2 {
                let parent = label + 1 + *name.get(label)? as usize;
                if parent + 1 >= name.len() {
                    return None;
                }
                if let Some(e) = exist(&name[parent..], 0) {
                    found = Some(e);
                    break;
                }
                label = parent;
            }
            let e = found?;
            if e.flags & exist_flags::REFERRAL != 0 || e.flags & exist_flags::ENCLOSER == 0 {
                return None;
            }
            if e.flags & exist_flags::APEX != 0 && risky(view, name, label, e.zone_len) {
                return None;
            }
            (3, e)
        }
    };
    if e.signed && dnssec_ok {
        return None;
    }
    let apex = name.get(name.len().checked_sub(e.zone_len)?..)?;
    let (template, zone) = view.read(apex, qtype_slot::SOA, |t| (t.section.to_vec(), t.zone()))?;
    (template.len() > TEMPLATE_LEN).then_some(TableNegative {
        rcode,
        template,
        zone,
    })
}

/// Whether the label of `name` at `label`, just above the apex of
/// `zone_len` bytes, is one the SOA's MNAME or RNAME would be compressed
/// against (or the template cannot be read).
fn risky(view: &View<'_>, name: &[u8], label: usize, zone_len: usize) -> bool {
    let Some(apex) = name
        .len()
        .checked_sub(zone_len)
        .and_then(|at| name.get(at..))
    else {
        return true;
    };
    let Some(len) = name.get(label).map(|&l| l as usize) else {
        return true;
    };
    let mut word = [0u8; 8];
    let take = (1 + len).min(8);
    word[..take].copy_from_slice(&name[label..label + take]);
    view.read(apex, qtype_slot::SOA, |t| {
        let head: &[u8; TEMPLATE_LEN] = t.section.get(..TEMPLATE_LEN)?.try_into().ok()?;
        Some(Template::from_bytes(head).risky.contains(&word))
    })
    .flatten()
    .unwrap_or(true)
}

/// What an SOA record takes, for reserving (the size limit is checked
/// on what was written).
const SOA_LEN_GUESS: usize = 64;

/// The zone whose apex is the last `apex_len` bytes of `name` (lower-cased
/// wire form), as the kernel keys its SOA template.
fn zone_at_end<'s>(snapshot: &'s Snapshot, name: &[u8], apex_len: usize) -> Option<&'s Zone> {
    let apex = name.get(name.len().checked_sub(apex_len)?..)?;
    let origin = LowerName::read(&mut BinDecoder::new(apex)).ok()?;
    snapshot.zone(&origin).map(|z| &**z)
}

/// `section` as the kernel sends it: rotated when the entry says so
/// (`rotation`: where it splits, and the RRset's length), the records
/// after the RRset (RRSIGs) in place.
fn write_section(out: &mut Vec<u8>, section: &[u8], rotation: Option<(u32, u32)>) {
    match rotation.map(|(split, len)| (split as usize, len as usize)) {
        Some((split, len)) if split <= len && len <= section.len() => {
            out.extend_from_slice(&section[split..len]);
            out.extend_from_slice(&section[..split]);
            out.extend_from_slice(&section[len..]);
        }
        _ => out.extend_from_slice(section),
    }
}

/// The table's slot for answers to `qtype`: every data type with a key
/// tail, and DS (answered by the parent at a delegation).
fn table_slot(qtype: u16) -> Option<u8> {
    let answered = plain_type(qtype) || qtype == rtype::DS;
    (answered && qtype_slot::keyed(qtype)).then(|| qtype_slot::of(qtype))
}

/// The header fields a reply sets beyond those copied from the query.
struct Head {
    /// AA: every answer but a referral.
    authoritative: bool,
    rcode: u8,
    ancount: u16,
    nscount: u16,
    /// Additional records, without the OPT record.
    arcount: u16,
}

/// What every hot reply is built from.
struct Reply<'a> {
    packet: &'a [u8],
    q: &'a Question,
    limit: usize,
    peer: IpAddr,
    now: u64,
    server: &'a ServerEdns,
    valid_cookie: &'a Cell<bool>,
}

impl Reply<'_> {
    /// The query's header patched and its question as sent, the records
    /// `sections` writes (about `sections_len` bytes), then the OPT
    /// record; `None` over the size limit (the full handler truncates).
    fn write(
        &self,
        head: Head,
        sections_len: usize,
        sections: impl FnOnce(&mut Vec<u8>),
    ) -> Option<Vec<u8>> {
        let (packet, q) = (self.packet, self.q);
        let opt_len = q.edns.map_or(0, |e| opt_len(&e, self.server));
        if q.end + sections_len + opt_len > self.limit {
            return None;
        }
        let mut out = Vec::with_capacity(q.end + sections_len + opt_len);
        out.extend_from_slice(&packet[..q.end]);
        let aa = if head.authoritative { 0x04 } else { 0 };
        out[2] = 0x80 | aa | (packet[2] & 0x01); // QR, AA, RD copied; opcode 0
        out[3] = (packet[3] & 0x10) | head.rcode; // CD copied; RA, Z, AD zero
        out[6..8].copy_from_slice(&head.ancount.to_be_bytes());
        out[8..10].copy_from_slice(&head.nscount.to_be_bytes());
        let arcount = head.arcount + u16::from(q.edns.is_some());
        out[10..12].copy_from_slice(&arcount.to_be_bytes());
        sections(&mut out);
        if out.len() + opt_len > self.limit {
            return None;
        }
        if let Some(e) = q.edns {
            let valid = write_opt(&mut out, &e, self.server, self.peer, self.now);
            self.valid_cookie.set(valid);
        }
        Some(out)
    }
}

/// Checks the query the way the kernel does and reads its question and
/// OPT record.
fn parse(p: &[u8]) -> Option<Question> {
    if p.len() < DNS_HEADER_LEN + 5 || p[2] & 0xf8 != 0 {
        return None;
    }
    let count = |at: usize| u16::from_be_bytes([p[at], p[at + 1]]);
    let arcount = count(10);
    if count(4) != 1 || count(6) != 0 || count(8) != 0 || arcount > 1 {
        return None;
    }
    let mut lower = [0u8; MAX_NAME_WIRE_LEN];
    let mut pos = DNS_HEADER_LEN;
    loop {
        let len = *p.get(pos)? as usize;
        let at = pos - DNS_HEADER_LEN;
        if at >= MAX_NAME_WIRE_LEN {
            return None;
        }
        if len == 0 {
            pos += 1;
            break;
        }
        // No compression pointers (or the reserved 0x40/0x80 forms).
        if len > 63 || at + 1 + len >= MAX_NAME_WIRE_LEN {
            return None;
        }
        let label = p.get(pos + 1..pos + 1 + len)?;
        lower[at] = len as u8;
        for (d, s) in lower[at + 1..at + 1 + len].iter_mut().zip(label) {
            *d = s.to_ascii_lowercase();
        }
        pos += 1 + len;
    }
    let name_len = pos - DNS_HEADER_LEN;
    let tc = p.get(pos..pos + 4)?;
    if u16::from_be_bytes([tc[2], tc[3]]) != 1 {
        return None;
    }
    let qtype = u16::from_be_bytes([tc[0], tc[1]]);
    let end = pos + 4;
    let edns = match (arcount, p.len() - end) {
        (0, 0) => None,
        (1, _) => Some(parse_opt(&p[end..])?),
        _ => return None,
    };
    Some(Question {
        end,
        lower,
        name_len,
        qtype,
        edns,
    })
}

/// Reads the OPT record filling the rest of the message (the kernel's
/// rules: version 0, at most 8 options in 256 bytes, NSID and COOKIE at
/// most once, well-formed COOKIE and ECS; others ignored).
fn parse_opt(o: &[u8]) -> Option<Edns> {
    if o.len() < OPT_LEN || o.len() > OPT_LEN + OPT_RDATA_MAX {
        return None;
    }
    if o[0] != 0 || u16::from_be_bytes([o[1], o[2]]) != rtype::OPT || o[5] != 0 || o[6] != 0 {
        return None;
    }
    let rdata = &o[OPT_LEN..];
    if u16::from_be_bytes([o[9], o[10]]) as usize != rdata.len() {
        return None;
    }
    let mut edns = Edns {
        payload: u16::from_be_bytes([o[3], o[4]]),
        dnssec_ok: o[7] & 0x80 != 0,
        nsid: false,
        cookie: Cookie::Absent,
    };
    let mut pos = 0;
    for _ in 0..MAX_OPTIONS {
        if pos >= rdata.len() {
            break;
        }
        let h = rdata.get(pos..pos + 4)?;
        let code = u16::from_be_bytes([h[0], h[1]]);
        let len = u16::from_be_bytes([h[2], h[3]]) as usize;
        let data = rdata.get(pos + 4..pos + 4 + len)?;
        match code {
            edns_option::NSID => {
                if len != 0 || edns.nsid {
                    return None;
                }
                edns.nsid = true;
            }
            edns_option::COOKIE => {
                if edns.cookie != Cookie::Absent || !(len == 8 || (16..=40).contains(&len)) {
                    return None;
                }
                let client = data[..8].try_into().expect("8 bytes");
                edns.cookie = match len {
                    24 => Cookie::Both(client, data[8..].try_into().expect("16 bytes")),
                    _ => Cookie::Client(client),
                };
            }
            edns_option::ECS => {
                let max = match data.get(..2).map(|f| u16::from_be_bytes([f[0], f[1]])) {
                    Some(1) => 32,
                    Some(2) => 128,
                    _ => return None,
                };
                let source = *data.get(2)? as usize;
                if len < 4 || source > max || len < 4 + source.div_ceil(8) {
                    return None;
                }
            }
            _ => {}
        }
        pos += 4 + len;
    }
    (pos == rdata.len()).then_some(edns)
}

fn nsid<'a>(e: &Edns, server: &'a ServerEdns) -> Option<&'a [u8]> {
    server.nsid.as_deref().filter(|_| e.nsid)
}

fn opt_len(e: &Edns, server: &ServerEdns) -> usize {
    let nsid = nsid(e, server).map_or(0, |n| 4 + n.len());
    let cookie = if e.cookie == Cookie::Absent {
        0
    } else {
        4 + 24
    };
    OPT_LEN + nsid + cookie
}

/// The reply's OPT record as `wire::reply_edns` encodes it: root owner,
/// our payload size, DO echoed, then NSID, then COOKIE.
/// The client cookie, the reply's server cookie and whether the query's
/// server cookie was valid, when the query carried a cookie.
fn server_cookie(
    e: &Edns,
    server: &ServerEdns,
    peer: IpAddr,
    now: u64,
) -> Option<([u8; 8], [u8; 16], bool)> {
    let (client, received) = match &e.cookie {
        Cookie::Absent => return None,
        Cookie::Client(c) => (*c, None),
        Cookie::Both(c, s) => (*c, Some(s)),
    };
    // As `Handler::stamp`: a mapped IPv4 peer is hashed as IPv4.
    let ip = match peer {
        IpAddr::V4(a) => ClientIp::V4(a.octets()),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => ClientIp::V4(v4.octets()),
            None => ClientIp::V6(a.octets()),
        },
    };
    let secrets = &server.cookies;
    let (cookie, valid) = cookie::reply(
        &secrets.key_words(),
        secrets.previous.is_some(),
        client,
        received,
        now as u32,
        &ip,
    );
    Some((client, cookie, valid))
}

/// Writes the reply's OPT record; whether the query's server cookie was
/// valid.
fn write_opt(out: &mut Vec<u8>, e: &Edns, server: &ServerEdns, peer: IpAddr, now: u64) -> bool {
    let rdlen = (opt_len(e, server) - OPT_LEN) as u16;
    out.extend_from_slice(&[0, 0, 41]);
    out.extend_from_slice(&server.udp_payload.max(CLASSIC_UDP_PAYLOAD).to_be_bytes());
    out.extend_from_slice(&[0, 0, if e.dnssec_ok { 0x80 } else { 0 }, 0]);
    out.extend_from_slice(&rdlen.to_be_bytes());
    if let Some(id) = nsid(e, server) {
        out.extend_from_slice(&edns_option::NSID.to_be_bytes());
        out.extend_from_slice(&(id.len() as u16).to_be_bytes());
        out.extend_from_slice(id);
    }
    let Some((client, server_cookie, valid)) = server_cookie(e, server, peer, now) else {
        return false;
    };
    out.extend_from_slice(&edns_option::COOKIE.to_be_bytes());
    out.extend_from_slice(&24u16.to_be_bytes());
    out.extend_from_slice(&client);
    out.extend_from_slice(&server_cookie);
    valid
}
