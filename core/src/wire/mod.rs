//! DNS wire format at the server's edge: turning datagram bytes into a
//! [`Request`] and a [`Reply`] back into bytes. Built on hickory-proto; no
//! server logic here (that is `handler`), no I/O.

use hickory_proto::op::{Message, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::Record;
use xdpdns_common::edns_option::{COOKIE as COOKIE_OPTION, NSID as NSID_OPTION};
use xdpdns_common::{CLASSIC_UDP_PAYLOAD, DNS_HEADER_LEN};

use crate::cookies::CookieSecrets;

pub mod compress;
pub mod encode;

use encode::{Header, Section, Writer};

/// A query the server will answer.
#[derive(Clone, Debug)]
pub struct Request {
    pub id: u16,
    pub recursion_desired: bool,
    pub checking_disabled: bool,
    /// The question as the client sent it (case preserved).
    pub query: Query,
    pub edns: Option<ClientEdns>,
    /// QUERY, NOTIFY or UPDATE (the only opcodes that get this far; an
    /// UPDATE's `query` is its zone section).
    pub op_code: OpCode,
    /// The message ends in a TSIG RR (verified by the transfer layer).
    pub signed: bool,
    /// IXFR: the serial of the SOA the client sent in the authority section.
    pub ixfr_serial: Option<u32>,
    /// The COOKIE option payload the reply carries (client cookie, then
    /// server cookie), set by [`crate::handler::Handler::stamp`].
    pub reply_cookie: Option<[u8; 24]>,
}

impl Request {
    /// A plain query with no EDNS.
    pub fn new(id: u16, query: Query) -> Request {
        Request {
            id,
            recursion_desired: false,
            checking_disabled: false,
            query,
            edns: None,
            op_code: OpCode::Query,
            signed: false,
            ixfr_serial: None,
            reply_cookie: None,
        }
    }
}

/// What the client's OPT record asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientEdns {
    pub version: u8,
    pub payload: u16,
    pub dnssec_ok: bool,
    pub nsid_requested: bool,
    pub cookie: ClientCookie,
}

/// The COOKIE option of a query (RFC 7873 §4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientCookie {
    #[default]
    Absent,
    /// Neither 8 bytes nor 16 to 40: answered with FORMERR (§5.2.2).
    Malformed,
    /// A client cookie, and the server cookie when it has the length of
    /// the RFC 9018 construction (other lengths are never ours, so they
    /// are treated as absent and a new one is minted).
    Present {
        client: [u8; 8],
        server: Option<[u8; 16]>,
    },
}

impl ClientCookie {
    /// Reads the first COOKIE option's payload.
    fn read(payload: &[u8]) -> ClientCookie {
        let Some(client) = payload.get(..8) else {
            return ClientCookie::Malformed;
        };
        let client = client.try_into().expect("8 bytes");
        match payload.len() {
            8 => ClientCookie::Present {
                client,
                server: None,
            },
            24 => ClientCookie::Present {
                client,
                server: Some(payload[8..].try_into().expect("16 bytes")),
            },
            16..=40 => ClientCookie::Present {
                client,
                server: None,
            },
            _ => ClientCookie::Malformed,
        }
    }
}

/// Why a datagram does not become a [`Request`].
#[derive(Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Not worth a reply: shorter than a header, or itself a response.
    Drop,
    /// Answer with these bytes (FORMERR or NOTIMP).
    Reply(Vec<u8>),
}

/// Parses a query. Anything with a readable header gets a reply: FORMERR
/// when the rest is malformed or QDCOUNT != 1, NOTIMP for opcodes other
/// than QUERY and NOTIFY.
pub fn parse_request(packet: &[u8]) -> Result<Request, Rejected> {
    if packet.len() < DNS_HEADER_LEN || packet[2] & 0x80 != 0 {
        return Err(Rejected::Drop);
    }
    let opcode = (packet[2] >> 3) & 0x0f;
    if !matches!(opcode, 0 | 4 | 5) {
        return Err(Rejected::Reply(header_only_reply(
            packet,
            ResponseCode::NotImp,
        )));
    }
    let formerr = || Rejected::Reply(header_only_reply(packet, ResponseCode::FormErr));
    let msg = Message::from_vec(packet).map_err(|_| formerr())?;
    if msg.queries.len() != 1 {
        return Err(formerr());
    }
    let edns = msg.edns.as_ref().map(|e| ClientEdns {
        version: e.version(),
        payload: e.max_payload(),
        dnssec_ok: e.flags().dnssec_ok,
        nsid_requested: e.option(EdnsCode::NSID).is_some(),
        cookie: match e.option(EdnsCode::Cookie) {
            Some(EdnsOption::Unknown(_, payload)) => ClientCookie::read(payload),
            _ => ClientCookie::Absent,
        },
    });
    // IXFR carries the client's SOA in authority, NOTIFY the new one in
    // the answer section.
    let ixfr_serial = msg
        .authorities
        .iter()
        .chain(&msg.answers)
        .find_map(|r| match &r.data {
            hickory_proto::rr::RData::SOA(soa) => Some(soa.serial),
            _ => None,
        });
    let signed = msg.signature.is_some();
    let Message {
        metadata, queries, ..
    } = msg;
    Ok(Request {
        id: metadata.id,
        recursion_desired: metadata.recursion_desired,
        checking_disabled: metadata.checking_disabled,
        query: queries.into_iter().next().expect("one query"),
        edns,
        op_code: metadata.op_code,
        signed,
        ixfr_serial,
        reply_cookie: None,
    })
}

/// A 12-byte reply echoing ID, opcode and RD, with no sections: what a
/// query we cannot (or will not) parse gets.
pub fn header_only_reply(packet: &[u8], rcode: ResponseCode) -> Vec<u8> {
    let mut out = vec![0u8; DNS_HEADER_LEN];
    out[..2].copy_from_slice(&packet[..2]);
    out[2] = 0x80 | (packet[2] & 0x79); // QR, opcode, RD
    out[3] = u16::from(rcode) as u8 & 0x0f;
    out
}

/// The answer the handler decided on, before encoding.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    pub rcode: ResponseCode,
    pub authoritative: bool,
    pub answers: Vec<Record>,
    pub authority: Vec<Record>,
    pub additional: Vec<Record>,
    /// More records than the size limit can hold at their least size;
    /// the sections were not filled (encoded as TC, question only).
    pub oversized: bool,
    /// The reply ends in a referral: its additional records are glue, not
    /// optional (RFC 9471), so it is truncated rather than sent without.
    pub referral: bool,
}

impl Reply {
    pub fn error(rcode: ResponseCode) -> Self {
        Reply {
            rcode,
            ..Reply::default()
        }
    }
}

/// EDNS payload size advertised by default: the DNS Flag Day 2020 value,
/// which avoids IP fragmentation on common paths.
pub const DEFAULT_UDP_PAYLOAD: u16 = 1232;

/// The server's side of EDNS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerEdns {
    /// UDP payload size advertised and honoured (RFC 6891 §6.2.5).
    pub udp_payload: u16,
    /// NSID payload returned to clients that ask (RFC 5001).
    pub nsid: Option<Vec<u8>>,
    /// Secrets for DNS cookies (RFC 7873, RFC 9018).
    pub cookies: CookieSecrets,
}

impl Default for ServerEdns {
    fn default() -> Self {
        ServerEdns {
            udp_payload: DEFAULT_UDP_PAYLOAD,
            nsid: None,
            cookies: CookieSecrets::random(),
        }
    }
}

/// The largest UDP reply the client can take: 512 without EDNS, otherwise
/// its advertised size capped by ours (and never below 512).
pub fn udp_reply_limit(req: &Request, server: &ServerEdns) -> usize {
    match req.edns {
        None => CLASSIC_UDP_PAYLOAD as usize,
        Some(e) => e.payload.min(server.udp_payload).max(CLASSIC_UDP_PAYLOAD) as usize,
    }
}

/// The least a resource record takes on the wire.
const MIN_RECORD_LEN: usize = 11;

/// Most records a reply of `limit` bytes can hold.
pub fn max_records(limit: usize) -> usize {
    limit.saturating_sub(DNS_HEADER_LEN) / MIN_RECORD_LEN
}

/// Encodes `reply` for `req`. If it would exceed `limit` bytes, the reply
/// becomes the question alone (and OPT) with TC=1: over UDP the client
/// retries over TCP; over TCP (limit 65,535) this is what NSD sends for an
/// answer that no DNS message can hold (Knot sends SERVFAIL). A partial
/// RRset is never sent.
pub fn encode_reply(req: &Request, reply: &Reply, limit: usize, server: &ServerEdns) -> Vec<u8> {
    // Every record takes at least 11 bytes (a one-byte owner, type, class,
    // TTL, RDLENGTH): a reply that cannot fit is truncated without
    // encoding it (a service with thousands of members).
    let records = reply.answers.len() + reply.authority.len() + reply.additional.len();
    let fits = !reply.oversized && records <= max_records(limit);
    let mut rcode = reply.rcode;
    if fits {
        match encode(req, reply, rcode, true, false, server) {
            Ok(bytes) if bytes.len() <= limit => return bytes,
            Ok(_) => {}
            // Only an unencodable record gets here (e.g. a name from a
            // wildcard expansion over 255 bytes): the client is told we
            // failed.
            Err(_) => rcode = ResponseCode::ServFail,
        }
    }
    // An authoritative answer's additional records are optional (RFC 2181
    // §9): without them it may fit, as NSD sends it. A referral's glue is
    // not (RFC 9471), so a referral that does not fit is truncated.
    let optional = !reply.referral && !reply.additional.is_empty() && !reply.oversized;
    if optional && rcode != ResponseCode::ServFail {
        let records = reply.answers.len() + reply.authority.len();
        if records <= max_records(limit) {
            if let Ok(bytes) = encode(req, reply, rcode, false, false, server) {
                if bytes.len() <= limit {
                    return bytes;
                }
            }
        }
    }
    // Over the limit (over TCP: no DNS message can hold it, which is what
    // NSD answers too; Knot sends SERVFAIL): the question and OPT, with TC.
    let failed = rcode != reply.rcode;
    let header_only = Reply {
        authoritative: reply.authoritative && !failed,
        ..Reply::error(rcode)
    };
    encode(req, &header_only, rcode, false, !failed, server)
        .expect("a header, one question and an OPT always encode")
}

/// `reply` to `req` as bytes: its sections (the additional records only
/// when `additional`), then the OPT record when the query had one.
fn encode(
    req: &Request,
    reply: &Reply,
    rcode: ResponseCode,
    additional: bool,
    truncated: bool,
    server: &ServerEdns,
) -> Result<Vec<u8>, Box<encode::EncodeError>> {
    let rcode = u16::from(rcode);
    let header = Header {
        id: req.id,
        op_code: u8::from(req.op_code),
        authoritative: reply.authoritative,
        truncated,
        recursion_desired: req.recursion_desired,
        checking_disabled: req.checking_disabled,
        rcode,
    };
    let q = &req.query;
    let mut w = Writer::new(
        header,
        q.name(),
        u16::from(q.query_type()),
        u16::from(q.query_class()),
        512,
    );
    w.records(Section::Answer, &reply.answers)?;
    w.records(Section::Authority, &reply.authority)?;
    if additional {
        w.records(Section::Additional, &reply.additional)?;
    }
    if let Some(client) = req.edns {
        let nsid = server
            .nsid
            .as_deref()
            .filter(|_| client.nsid_requested && client.version == 0);
        let mut options: Vec<(u16, &[u8])> = Vec::with_capacity(2);
        if let Some(id) = nsid {
            options.push((NSID_OPTION, id));
        }
        if let Some(cookie) = &req.reply_cookie {
            options.push((COOKIE_OPTION, cookie));
        }
        let payload = server.udp_payload.max(CLASSIC_UDP_PAYLOAD);
        w.opt(payload, rcode, client.dnssec_ok, &options);
    }
    Ok(w.finish())
}

/// Frames a message for TCP (RFC 1035 §4.2.2: two-byte length prefix).
pub fn tcp_frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 2);
    out.extend_from_slice(&(message.len() as u16).to_be_bytes());
    out.extend_from_slice(message);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Edns;
    use hickory_proto::rr::rdata::opt::NSIDPayload;
    use hickory_proto::rr::{Name, RecordType};
    use std::str::FromStr;

    fn query_bytes(name: &str, edns: Option<Edns>) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.id = 0xbeef;
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_str(name).unwrap(), RecordType::A));
        m.edns = edns;
        m.to_vec().unwrap()
    }

    fn server() -> ServerEdns {
        ServerEdns {
            udp_payload: 1232,
            nsid: Some(b"node-1".to_vec()),
            cookies: CookieSecrets::random(),
        }
    }

    #[test]
    fn short_packets_and_responses_are_dropped() {
        for len in 0..DNS_HEADER_LEN {
            assert_eq!(parse_request(&vec![0u8; len]).unwrap_err(), Rejected::Drop);
        }
        let mut resp = query_bytes("a.example.", None);
        resp[2] |= 0x80;
        assert_eq!(parse_request(&resp).unwrap_err(), Rejected::Drop);
    }

    #[test]
    fn unknown_opcode_gets_notimp_with_id_and_opcode() {
        let mut q = query_bytes("a.example.", None);
        q[2] = (q[2] & 0x87) | (3 << 3);
        let Err(Rejected::Reply(r)) = parse_request(&q) else {
            panic!("expected a reply")
        };
        assert_eq!(&r[..2], &[0xbe, 0xef]);
        assert_eq!(r[2], 0x80 | (3 << 3) | 0x01);
        assert_eq!(r[3] & 0x0f, 4, "NOTIMP");
    }

    #[test]
    fn qdcount_other_than_one_is_formerr() {
        let mut q = query_bytes("a.example.", None);
        q[5] = 0; // QDCOUNT 0, trailing question ignored
        let Err(Rejected::Reply(r)) = parse_request(&q) else {
            panic!()
        };
        assert_eq!(r[3] & 0x0f, 1);
    }

    fn with_cookie(payload: &[u8]) -> ClientCookie {
        let mut e = Edns::new();
        e.options_mut()
            .insert(EdnsOption::Unknown(COOKIE_OPTION, payload.to_vec()));
        let req = parse_request(&query_bytes("a.example.", Some(e))).unwrap();
        req.edns.unwrap().cookie
    }

    #[test]
    fn cookie_lengths_follow_rfc7873() {
        let c = [7u8; 40];
        let client = [7u8; 8];
        for len in [0, 1, 7, 9, 15, 41] {
            let payload = vec![7u8; len];
            assert_eq!(
                with_cookie(&payload),
                ClientCookie::Malformed,
                "length {len}"
            );
        }
        assert_eq!(
            with_cookie(&c[..8]),
            ClientCookie::Present {
                client,
                server: None
            }
        );
        assert_eq!(
            with_cookie(&c[..24]),
            ClientCookie::Present {
                client,
                server: Some([7; 16])
            }
        );
        for len in [16, 23, 25, 40] {
            assert_eq!(
                with_cookie(&c[..len]),
                ClientCookie::Present {
                    client,
                    server: None
                },
                "length {len}: a server cookie not of our construction"
            );
        }
    }

    #[test]
    fn edns_fields_are_read() {
        let mut e = Edns::new();
        e.set_max_payload(4096).set_dnssec_ok(true);
        e.options_mut()
            .insert(EdnsOption::NSID(NSIDPayload::new(Vec::new()).unwrap()));
        let req = parse_request(&query_bytes("a.example.", Some(e))).unwrap();
        assert_eq!(
            req.edns,
            Some(ClientEdns {
                version: 0,
                payload: 4096,
                dnssec_ok: true,
                nsid_requested: true,
                cookie: ClientCookie::Absent,
            })
        );
        assert_eq!(udp_reply_limit(&req, &server()), 1232);
        let plain = parse_request(&query_bytes("a.example.", None)).unwrap();
        assert_eq!(udp_reply_limit(&plain, &server()), 512);
    }

    #[test]
    fn oversized_reply_becomes_truncated_question_only() {
        let req = parse_request(&query_bytes("a.example.", None)).unwrap();
        let rec = |i: u8| {
            Record::from_rdata(
                Name::from_str("a.example.").unwrap(),
                60,
                hickory_proto::rr::RData::A(hickory_proto::rr::rdata::A::new(10, 0, 0, i)),
            )
        };
        let reply = Reply {
            authoritative: true,
            answers: (0..40).map(rec).collect(),
            ..Reply::default()
        };
        let full = encode_reply(&req, &reply, 65535, &server());
        assert!(full.len() > 512);
        let cut = encode_reply(&req, &reply, 512, &server());
        let m = Message::from_vec(&cut).unwrap();
        assert!(m.metadata.truncation);
        assert!(m.answers.is_empty());
        assert_eq!(m.queries.len(), 1);
        // Far too big to fit even at the least size per record: the same
        // truncated reply, decided before anything is copied or encoded.
        let huge = Reply {
            authoritative: true,
            answers: (0..10_000).map(|i| rec(i as u8)).collect(),
            ..Reply::default()
        };
        assert_eq!(encode_reply(&req, &huge, 512, &server()), cut);
        let thousand = Reply {
            answers: huge.answers[..1000].to_vec(),
            ..huge
        };
        let whole = Message::from_vec(&encode_reply(&req, &thousand, 65535, &server())).unwrap();
        assert_eq!(whole.answers.len(), 1000, "what fits is sent whole");
    }

    #[test]
    fn an_answer_no_message_can_hold_is_the_question_with_tc_over_tcp_too() {
        let mut edns = Edns::new();
        edns.set_max_payload(1232);
        let req = parse_request(&query_bytes("a.example.", Some(edns))).unwrap();
        // 5,000 A records: 80 KB, over the 65,535 bytes of any message,
        // though not over it at the least size per record.
        let reply = Reply {
            authoritative: true,
            answers: (0..5000u32)
                .map(|i| {
                    Record::from_rdata(
                        Name::from_str("a.example.").unwrap(),
                        60,
                        hickory_proto::rr::RData::A(hickory_proto::rr::rdata::A::from(
                            std::net::Ipv4Addr::from(0x0a00_0000 + i),
                        )),
                    )
                })
                .collect(),
            ..Reply::default()
        };
        let bytes = encode_reply(&req, &reply, u16::MAX as usize, &server());
        let m = Message::from_vec(&bytes).unwrap();
        assert!(m.metadata.truncation);
        assert!(m.answers.is_empty(), "no partial RRset");
        assert_eq!(m.queries.len(), 1);
        assert!(m.edns.is_some(), "OPT kept, as NSD does");
    }
}
