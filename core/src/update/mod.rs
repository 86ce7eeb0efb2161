//! RFC 2136 dynamic updates, the pure half: reading an UPDATE message,
//! checking its prerequisites and the requester's permission against the
//! zone as it stands, and turning its update section into the record
//! changes the store commits (one UPDATE, one commit). No I/O: the shell
//! runs [`plan`] under the store's writer lock and waits for the journal
//! before it answers.

pub mod policy;
mod prerequisite;
mod section;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{DNSClass, LowerName, Name, Record, RecordType};

pub use policy::{Grant, NameMatch, Permission, UpdatePolicy};

use crate::zone::store::Edit;
use crate::zone::Zone;

/// Most records (prerequisites and updates together) one UPDATE may
/// carry: larger ones are REFUSED unread. A TCP message of 64 KiB holds
/// a few thousand small records; this is above what the tools that write
/// DNS send (ExternalDNS batches hundreds) and bounds the commit.
pub const MAX_UPDATE_RECORDS: usize = 4096;

/// An UPDATE message's sections (RFC 2136 §2).
#[derive(Clone, Debug)]
pub struct Update {
    /// The zone section's name (ZNAME).
    pub zone: Name,
    pub prerequisites: Vec<Record>,
    pub updates: Vec<Record>,
}

impl Update {
    /// Reads the sections of a parsed UPDATE message. The zone section
    /// must hold one record of type SOA and class IN (§3.1.1): FORMERR
    /// otherwise, or NOTAUTH for another class, which no zone here has.
    pub fn from_message(msg: Message) -> Result<Update, ResponseCode> {
        let [zone] = msg.queries.as_slice() else {
            return Err(ResponseCode::FormErr);
        };
        if zone.query_type() != RecordType::SOA {
            return Err(ResponseCode::FormErr);
        }
        if zone.query_class() != DNSClass::IN {
            return Err(ResponseCode::NotAuth);
        }
        if msg.answers.len() + msg.authorities.len() > MAX_UPDATE_RECORDS {
            return Err(ResponseCode::Refused);
        }
        Ok(Update {
            zone: zone.name().clone(),
            prerequisites: msg.answers,
            updates: msg.authorities,
        })
    }

    pub fn zone_key(&self) -> LowerName {
        LowerName::new(&self.zone)
    }
}

/// Decides what `update` does to `zone` (the zone as it stands, under the
/// store's writer lock): the prerequisites (§3.2), the prescan of the
/// update section (§3.4.1), the requester's permission (§3.3, checked for
/// every record it would change), then the update section applied in
/// order (§3.4.2). The checks run in the order Knot and BIND run them, so
/// an UPDATE with several faults gets the same RCODE from all three. The
/// error is the RCODE of the refusal; nothing is changed then.
pub fn plan(zone: &Zone, update: &Update, permission: &Permission) -> Result<Edit, ResponseCode> {
    let origin = zone.origin_key();
    prerequisite::check(zone, &update.prerequisites)?;
    section::prescan(origin, &update.updates)?;
    section::permitted(zone, &update.updates, permission)?;
    Ok(section::apply(zone, &update.updates))
}

#[cfg(test)]
mod tests;
