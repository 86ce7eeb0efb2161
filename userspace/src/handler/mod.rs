//! The request-handler boundary: query bytes in, reply bytes out, answered
//! from one zone-store snapshot. Pure: the tokio servers and (later) the
//! XDP compiler's differential tests both call this.

mod chaos;
mod lookup;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, LowerName, RecordType};

pub use chaos::Identity;
pub use lookup::resolve;

use crate::wire::{self, Rejected, Reply, Request, ServerEdns};
use crate::zone::Snapshot;

/// How the query arrived; decides the size limit of the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// Everything but the zone data that shapes an answer.
#[derive(Clone, Debug)]
pub struct Handler {
    pub edns: ServerEdns,
    pub identity: Identity,
}

impl Handler {
    /// Answers one DNS message. `None` means send nothing (garbage or a
    /// response packet).
    pub fn handle(
        &self,
        snapshot: &Snapshot,
        packet: &[u8],
        transport: Transport,
    ) -> Option<Vec<u8>> {
        let req = match wire::parse_request(packet) {
            Ok(req) => req,
            Err(Rejected::Drop) => return None,
            Err(Rejected::Reply(bytes)) => return Some(bytes),
        };
        let reply = self.answer(snapshot, &req, transport);
        let limit = match transport {
            Transport::Udp => wire::udp_reply_limit(&req, &self.edns),
            Transport::Tcp => u16::MAX as usize,
        };
        Some(wire::encode_reply(&req, &reply, limit, &self.edns))
    }

    /// The decision, before encoding.
    pub fn answer(&self, snapshot: &Snapshot, req: &Request, transport: Transport) -> Reply {
        if req.edns.is_some_and(|e| e.version > 0) {
            return Reply::error(ResponseCode::BADVERS);
        }
        let q = &req.query;
        match q.query_type() {
            // Meta-types that are not questions (RFC 6895 §3.1).
            RecordType::OPT | RecordType::TSIG => return Reply::error(ResponseCode::FormErr),
            // Zone transfers are closed until transfer ACLs exist; never over UDP.
            RecordType::AXFR | RecordType::IXFR => return Reply::error(ResponseCode::Refused),
            _ => {}
        }
        let _ = transport;
        match q.query_class() {
            DNSClass::IN => {}
            DNSClass::CH => return self.identity.answer(q),
            _ => return Reply::error(ResponseCode::Refused),
        }
        let key = LowerName::new(q.name());
        match snapshot.find_zone(&key) {
            Some(zone) => resolve(zone, q.name(), q.query_type()),
            None => Reply::error(ResponseCode::Refused),
        }
    }
}
