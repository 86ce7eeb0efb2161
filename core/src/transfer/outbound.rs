//! Outgoing AXFR (RFC 5936) and IXFR (RFC 1995): deciding what a transfer
//! request gets, and packing records into as many messages as needed.
//! Pure: the TCP shell feeds the messages to the socket.

use std::sync::Arc;

use hickory_proto::op::{Query, ResponseCode};
use hickory_proto::rr::{LowerName, Record, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

use super::ixfr_history::{Ixfr, IxfrSource};
use crate::handler::Transport;
use crate::wire::{Reply, Request};
use crate::zone::{Snapshot, Zone, ZoneDiff};

/// Messages are closed once they pass this size (a record never makes one
/// exceed 64 KiB). 16 KiB is what BIND and Knot use too.
pub const MESSAGE_TARGET: usize = 16 * 1024;

/// What a transfer request gets.
pub enum Plan {
    /// A single ordinary reply (an error, or the SOA alone).
    Reply(Reply),
    /// The whole zone.
    Axfr(Arc<Zone>),
    /// The condensed difference from the client's serial.
    Ixfr(ZoneDiff),
}

/// Decides the answer to an AXFR or IXFR the ACL already allowed.
pub fn plan(
    snapshot: &Snapshot,
    history: &dyn IxfrSource,
    req: &Request,
    transport: Transport,
) -> Plan {
    let key = LowerName::new(req.query.name());
    let Some(zone) = snapshot.zone(&key) else {
        return Plan::Reply(Reply::error(ResponseCode::NotAuth));
    };
    let Some(soa) = zone.soa_record() else {
        return Plan::Reply(Reply::error(ResponseCode::ServFail));
    };
    let soa_reply = || {
        Plan::Reply(Reply {
            authoritative: true,
            answers: vec![soa.clone()],
            ..Reply::default()
        })
    };
    match (req.query.query_type(), transport) {
        // RFC 5936 §4.2: AXFR is TCP only.
        (RecordType::AXFR, Transport::Udp) => Plan::Reply(Reply::error(ResponseCode::Refused)),
        (RecordType::AXFR, Transport::Tcp) => Plan::Axfr(zone.clone()),
        (_, transport) => {
            let Some(from) = req.ixfr_serial else {
                // RFC 1995 §3: the query carries the client's SOA.
                return Plan::Reply(Reply::error(ResponseCode::FormErr));
            };
            // RFC 1995 §4: over UDP, a reply that cannot be a short
            // difference is the SOA alone; the client retries by TCP. No
            // diff is condensed only to be thrown away.
            if transport == Transport::Udp {
                return soa_reply();
            }
            match history.ixfr(zone, from) {
                Ixfr::Current => soa_reply(),
                Ixfr::Unavailable => Plan::Axfr(zone.clone()),
                Ixfr::Diff(d) => Plan::Ixfr(d),
            }
        }
    }
}

/// Streams an AXFR: SOA, every other record, SOA. `sink` returns false to
/// stop (the client went away).
pub fn write_axfr(
    zone: &Zone,
    id: u16,
    query: &Query,
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
) -> bool {
    let Some(soa) = zone.soa_record() else {
        return false;
    };
    let body = zone
        .records()
        .filter(|r| r.record_type() != RecordType::SOA);
    let records = std::iter::once(soa.clone())
        .chain(body)
        .chain(std::iter::once(soa));
    pack(id, query, records, sink)
}

/// Streams an IXFR difference sequence (RFC 1995 §4): new SOA, old SOA,
/// removed records, new SOA, added records, new SOA.
pub fn write_ixfr(
    diff: &ZoneDiff,
    id: u16,
    query: &Query,
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
) -> bool {
    let new_soa = diff.added.first().cloned();
    let Some(new_soa) = new_soa.filter(|r| r.record_type() == RecordType::SOA) else {
        return false;
    };
    let records = std::iter::once(new_soa.clone())
        .chain(diff.removed.iter().cloned())
        .chain(diff.added.iter().cloned())
        .chain(std::iter::once(new_soa));
    pack(id, query, records, sink)
}

/// Packs `records` into authoritative response messages of about
/// [`MESSAGE_TARGET`] bytes, the question in the first only.
fn pack(
    id: u16,
    query: &Query,
    records: impl Iterator<Item = Record>,
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
) -> bool {
    let mut records = records.peekable();
    let mut first = true;
    loop {
        let mut buf = Vec::with_capacity(MESSAGE_TARGET + 1024);
        let mut count: u16 = 0;
        {
            let mut enc = BinEncoder::new(&mut buf);
            enc.emit_vec(&[0u8; 12]).expect("vec");
            if first {
                query.emit(&mut enc).expect("a parsed question encodes");
            }
            while let Some(r) = records.peek() {
                if count > 0 && (enc.offset() >= MESSAGE_TARGET || count == u16::MAX) {
                    break;
                }
                r.emit(&mut enc).expect("zone records encode");
                records.next();
                count += 1;
            }
        }
        buf[0..2].copy_from_slice(&id.to_be_bytes());
        buf[2] = 0x84; // QR, AA, opcode QUERY
        buf[3] = 0;
        buf[4..6].copy_from_slice(&u16::from(first).to_be_bytes());
        buf[6..8].copy_from_slice(&count.to_be_bytes());
        if !sink(buf) {
            return false;
        }
        first = false;
        if records.peek().is_none() {
            return true;
        }
    }
}

#[cfg(test)]
mod tests;
