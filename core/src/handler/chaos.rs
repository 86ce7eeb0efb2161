//! CHAOS-class TXT identity queries: `id.server`, `hostname.bind`,
//! `version.bind` (and `version.server`). Each can be hidden.

use hickory_proto::op::{Query, ResponseCode};
use hickory_proto::rr::rdata::TXT;
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};

use crate::wire::Reply;

/// Strings returned for identity queries; `None` hides one (REFUSED).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// `id.server.` and `hostname.bind.`
    pub server_id: Option<String>,
    /// `version.bind.` and `version.server.`
    pub version: Option<String>,
}

impl Identity {
    pub fn answer(&self, q: &Query) -> Reply {
        let name = q.name().to_lowercase().to_ascii();
        let value = match name.trim_end_matches('.') {
            "id.server" | "hostname.bind" => &self.server_id,
            "version.bind" | "version.server" => &self.version,
            _ => return Reply::error(ResponseCode::Refused),
        };
        let Some(value) = value else {
            return Reply::error(ResponseCode::Refused);
        };
        let mut reply = Reply {
            authoritative: true,
            ..Reply::default()
        };
        if matches!(q.query_type(), RecordType::TXT | RecordType::ANY) {
            let mut rec = Record::from_rdata(
                q.name().clone(),
                0,
                RData::TXT(TXT::new(vec![value.clone()])),
            );
            rec.dns_class = DNSClass::CH;
            reply.answers.push(rec);
        }
        reply
    }
}
