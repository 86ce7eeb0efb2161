//! The reply encoder: a [`super::Reply`] as bytes, with names compressed
//! by [`Compressor`] (case-insensitively), so the full handler, the hot
//! path and the kernel table's compiler write the same answer bytes.
//!
//! Names in the RDATA of the RFC 1035 types (NS, CNAME, PTR, MX, SOA) are
//! compressed; every other type's RDATA is hickory's encoding of it on
//! its own (names whole), with the targets of SRV, SVCB and HTTPS
//! remembered for the names after them (an SRV answer's additional
//! records then point at its targets).

use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
use thiserror::Error;
use xdpdns_common::DNS_HEADER_LEN;

use super::compress::{Compressor, WireName};

/// A record that cannot be encoded.
#[derive(Debug, Error)]
#[error("{rtype} record of {owner} cannot be encoded: {source}")]
pub struct EncodeError {
    owner: Name,
    rtype: RecordType,
    #[source]
    source: hickory_proto::ProtoError,
}

/// The header fields of a reply.
#[derive(Clone, Copy, Debug, Default)]
pub struct Header {
    pub id: u16,
    pub op_code: u8,
    pub authoritative: bool,
    pub truncated: bool,
    pub recursion_desired: bool,
    pub checking_disabled: bool,
    /// The low four bits go here, the rest in the OPT record.
    pub rcode: u16,
}

/// Writes one message front to back. Counts are patched as records go.
pub struct Writer {
    out: Vec<u8>,
    names: Compressor,
    /// Where hickory encodes RDATA the writer does not (reused).
    rdata: Vec<u8>,
}

/// The section a record goes to (its count in the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    Answer = 6,
    Authority = 8,
    Additional = 10,
}

impl Writer {
    /// A message with `header` and the question `qname` (as the client
    /// sent it), `qtype`, `qclass`.
    pub fn new(header: Header, qname: &Name, qtype: u16, qclass: u16, capacity: usize) -> Writer {
        let mut out = Vec::with_capacity(capacity.max(64));
        out.extend_from_slice(&header.id.to_be_bytes());
        out.push(
            0x80 | (header.op_code & 0x0f) << 3
                | u8::from(header.authoritative) << 2
                | u8::from(header.truncated) << 1
                | u8::from(header.recursion_desired),
        );
        out.push(u8::from(header.checking_disabled) << 4 | (header.rcode & 0x0f) as u8);
        out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
        let mut w = Writer {
            out,
            names: Compressor::default(),
            rdata: Vec::new(),
        };
        let name = WireName::new(qname);
        w.names.written(DNS_HEADER_LEN, name.bytes());
        w.out.extend_from_slice(name.bytes());
        w.out.extend_from_slice(&qtype.to_be_bytes());
        w.out.extend_from_slice(&qclass.to_be_bytes());
        w
    }

    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    fn count(&mut self, section: Section) {
        let at = section as usize;
        let n = u16::from_be_bytes([self.out[at], self.out[at + 1]]).wrapping_add(1);
        self.out[at..at + 2].copy_from_slice(&n.to_be_bytes());
    }

    /// Appends `records` to `section`.
    pub fn records<'r>(
        &mut self,
        section: Section,
        records: impl IntoIterator<Item = &'r Record>,
    ) -> Result<(), Box<EncodeError>> {
        for r in records {
            self.record(section, r)?;
        }
        Ok(())
    }

    /// Appends one record to `section`.
    pub fn record(&mut self, section: Section, r: &Record) -> Result<(), Box<EncodeError>> {
        let owner = WireName::new(&r.name);
        self.names.write(&mut self.out, owner.bytes());
        let rtype = r.record_type();
        self.out.extend_from_slice(&u16::from(rtype).to_be_bytes());
        self.out
            .extend_from_slice(&u16::from(r.dns_class).to_be_bytes());
        self.out.extend_from_slice(&r.ttl.to_be_bytes());
        let rdlength_at = self.out.len();
        self.out.extend_from_slice(&[0, 0]);
        self.rdata(&r.data).map_err(|source| {
            Box::new(EncodeError {
                owner: r.name.clone(),
                rtype,
                source,
            })
        })?;
        let rdlength = self.out.len() - rdlength_at - 2;
        let rdlength = u16::try_from(rdlength).map_err(|_| {
            Box::new(EncodeError {
                owner: r.name.clone(),
                rtype,
                source: "RDATA over 65,535 bytes".into(),
            })
        })?;
        self.out[rdlength_at..rdlength_at + 2].copy_from_slice(&rdlength.to_be_bytes());
        self.count(section);
        Ok(())
    }

    /// Appends one record given as the zone store keeps it: `owner` and
    /// `rdata` in wire form, names uncompressed. The bytes are those of
    /// [`Writer::record`] for the same record (the store's RDATA is
    /// hickory's encoding, which is what `record` writes of every type
    /// whose names it does not compress); `None` when `rdata` is not
    /// framed as its type says.
    pub fn record_wire(
        &mut self,
        section: Section,
        owner: &[u8],
        rtype: u16,
        ttl: u32,
        rdata: &[u8],
    ) -> Option<()> {
        self.names.write(&mut self.out, owner);
        self.out.extend_from_slice(&rtype.to_be_bytes());
        self.out.extend_from_slice(&1u16.to_be_bytes());
        self.out.extend_from_slice(&ttl.to_be_bytes());
        let rdlength_at = self.out.len();
        self.out.extend_from_slice(&[0, 0]);
        let name_at = |at: usize| Some(&rdata[at..at + name_len(rdata.get(at..)?)?]);
        match RecordType::from(rtype) {
            RecordType::NS | RecordType::CNAME | RecordType::PTR => {
                let name = name_at(0).filter(|n| n.len() == rdata.len())?;
                self.names.write(&mut self.out, name);
            }
            RecordType::MX => {
                let name = name_at(2).filter(|n| n.len() + 2 == rdata.len())?;
                self.out.extend_from_slice(&rdata[..2]);
                self.names.write(&mut self.out, name);
            }
            RecordType::SOA => {
                let mname = name_at(0)?;
                let rname = name_at(mname.len())?;
                let fixed = rdata
                    .get(mname.len() + rname.len()..)
                    .filter(|f| f.len() == 20)?;
                self.names.write(&mut self.out, mname);
                self.names.write(&mut self.out, rname);
                self.out.extend_from_slice(fixed);
            }
            t => {
                let start = self.out.len();
                self.out.extend_from_slice(rdata);
                let target = match t {
                    RecordType::SRV => Some(6),
                    RecordType::SVCB | RecordType::HTTPS => Some(2),
                    _ => None,
                };
                if let Some(at) = target {
                    self.names.written(start + at, name_at(at)?);
                }
            }
        }
        let rdlength = u16::try_from(self.out.len() - rdlength_at - 2).ok()?;
        self.out[rdlength_at..rdlength_at + 2].copy_from_slice(&rdlength.to_be_bytes());
        self.count(section);
        Some(())
    }

    fn name(&mut self, name: &Name) {
        let w = WireName::new(name);
        self.names.write(&mut self.out, w.bytes());
    }

    fn rdata(&mut self, data: &RData) -> Result<(), hickory_proto::ProtoError> {
        match data {
            RData::NS(n) => self.name(&n.0),
            RData::CNAME(n) => self.name(&n.0),
            RData::PTR(n) => self.name(&n.0),
            RData::MX(mx) => {
                self.out.extend_from_slice(&mx.preference.to_be_bytes());
                self.name(&mx.exchange);
            }
            RData::SOA(soa) => {
                self.name(&soa.mname);
                self.name(&soa.rname);
                self.out.extend_from_slice(&soa.serial.to_be_bytes());
                self.out.extend_from_slice(&soa.refresh.to_be_bytes());
                self.out.extend_from_slice(&soa.retry.to_be_bytes());
                self.out.extend_from_slice(&soa.expire.to_be_bytes());
                self.out.extend_from_slice(&soa.minimum.to_be_bytes());
            }
            other => {
                let start = self.out.len();
                self.rdata.clear();
                other.emit(&mut BinEncoder::new(&mut self.rdata))?;
                self.out.extend_from_slice(&self.rdata);
                // A target written whole is still a name later ones may
                // point to (an SRV answer's additional records).
                let target = match other {
                    RData::SRV(srv) => Some((start + 6, &srv.target)),
                    RData::SVCB(svcb) | RData::HTTPS(hickory_proto::rr::rdata::HTTPS(svcb)) => {
                        Some((start + 2, &svcb.target_name))
                    }
                    _ => None,
                };
                if let Some((at, name)) = target {
                    let w = WireName::new(name);
                    if self.out.get(at..at + w.bytes().len()) == Some(w.bytes()) {
                        self.names.written(at, w.bytes());
                    }
                }
            }
        }
        Ok(())
    }

    /// Appends the OPT record (RFC 6891): root owner, `payload`, the high
    /// bits of `rcode`, version 0, DO, then `options` (code, data) in
    /// order.
    pub fn opt(&mut self, payload: u16, rcode: u16, dnssec_ok: bool, options: &[(u16, &[u8])]) {
        let rdlength: usize = options.iter().map(|(_, d)| 4 + d.len()).sum();
        self.out.push(0);
        self.out
            .extend_from_slice(&u16::from(RecordType::OPT).to_be_bytes());
        self.out.extend_from_slice(&payload.to_be_bytes());
        self.out.push((rcode >> 4) as u8);
        self.out.push(0);
        self.out.push(if dnssec_ok { 0x80 } else { 0 });
        self.out.push(0);
        self.out.extend_from_slice(&(rdlength as u16).to_be_bytes());
        for (code, data) in options {
            self.out.extend_from_slice(&code.to_be_bytes());
            self.out
                .extend_from_slice(&(data.len() as u16).to_be_bytes());
            self.out.extend_from_slice(data);
        }
        self.count(Section::Additional);
    }

    pub fn finish(self) -> Vec<u8> {
        self.out
    }

    /// The bytes after the question, and the answer, authority and
    /// additional counts: what a table entry holds.
    pub fn sections(&self) -> (&[u8], [u16; 3]) {
        let o = &self.out;
        let count = |at: usize| u16::from_be_bytes([o[at], o[at + 1]]);
        let mut end = DNS_HEADER_LEN;
        while o[end] != 0 {
            end += 1 + o[end] as usize;
        }
        (&o[end + 5..], [count(6), count(8), count(10)])
    }
}

/// The length of the uncompressed wire name at the start of `wire`.
fn name_len(wire: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let len = *wire.get(at)? as usize;
        if len > 63 {
            return None;
        }
        at += 1 + len;
        if len == 0 {
            return Some(at);
        }
    }
}
