//! An RRset's records in wire form, in one allocation.
//!
//! hickory's `RData` is 184 bytes whatever it holds; a million-record zone
//! kept as `Vec<RData>` spent most of its memory on that padding. Here an
//! A record takes 6 bytes: a two-byte length, then the RDATA as it goes on
//! the wire (names uncompressed, their case kept). Records are decoded
//! when a reply needs them as `RData`; the answer encoders copy the bytes.

use hickory_proto::rr::{RData, RecordType};

use super::inline::InlineBytes;
use hickory_proto::serialize::binary::{
    BinDecoder, BinEncodable, BinEncoder, NameEncoding, Restrict,
};

/// Records of one type: `[count: u16] ([len: u16] [rdata])*`, empty when
/// there are none.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct PackedRdatas(InlineBytes);

/// Why a record cannot be kept (its wire form is longer than RDATA allows).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("record data of {rtype} does not encode to at most 65535 bytes")]
pub struct PackError {
    pub rtype: RecordType,
}

impl PackedRdatas {
    /// Packs `rdatas` in their order (duplicates are the caller's business).
    pub fn pack<'a>(rdatas: impl IntoIterator<Item = &'a RData>) -> Result<Self, PackError> {
        let mut out = Vec::new();
        let mut count = 0u16;
        out.extend_from_slice(&[0, 0]);
        for d in rdatas {
            append(&mut out, d)?;
            count = count.checked_add(1).ok_or(PackError {
                rtype: d.record_type(),
            })?;
        }
        if count == 0 {
            return Ok(PackedRdatas::default());
        }
        out[..2].copy_from_slice(&count.to_be_bytes());
        Ok(PackedRdatas(InlineBytes::from_vec(out)))
    }

    /// Takes already packed bytes (a snapshot's), checking their framing.
    pub fn from_packed(bytes: &[u8]) -> Option<Self> {
        if bytes.is_empty() {
            return Some(PackedRdatas::default());
        }
        let count = u16::from_be_bytes(bytes.get(..2)?.try_into().ok()?);
        let mut rest = &bytes[2..];
        for _ in 0..count {
            let len = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize;
            rest = rest.get(2 + len..)?;
        }
        (count > 0 && rest.is_empty()).then(|| PackedRdatas(InlineBytes::from_vec(bytes.to_vec())))
    }

    /// The packed bytes, as [`PackedRdatas::from_packed`] takes them.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_slice()
    }

    pub fn len(&self) -> usize {
        match self.0.as_slice().get(..2) {
            Some(c) => u16::from_be_bytes([c[0], c[1]]) as usize,
            None => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.as_slice().is_empty()
    }

    /// Each record's RDATA as it goes on the wire.
    pub fn wire(&self) -> WireRdatas<'_> {
        WireRdatas {
            rest: self.0.as_slice().get(2..).unwrap_or_default(),
        }
    }

    /// Each record decoded.
    pub fn decoded(&self, rtype: RecordType) -> impl Iterator<Item = RData> + '_ {
        self.wire().map(move |w| decode(rtype, w))
    }

    /// The position of the record equal to `rdata` (as `RData` compares:
    /// names in it case-insensitively).
    pub fn position(&self, rdata: &RData) -> Option<usize> {
        self.position_encoded(rdata, encode(rdata).ok()?.as_slice())
    }

    /// [`PackedRdatas::position`] of `rdata` whose wire form is `wire`
    /// (from [`encode`]).
    pub fn position_encoded(&self, rdata: &RData, wire: &[u8]) -> Option<usize> {
        let rtype = rdata.record_type();
        // Same bytes is equal; equal under case folding needs the same
        // length, and for the types whose only names are plain domain
        // names the same bytes but for ASCII case: checked first, so a
        // service's thousand SRV records are not each decoded (with an
        // allocated target name) for every member added.
        let folded = folds_names_only(rtype);
        self.wire().position(|w| {
            same_bytes(w, wire)
                || (w.len() == wire.len()
                    && has_names(rtype)
                    && (!folded || w.eq_ignore_ascii_case(wire))
                    && decode(rtype, w) == *rdata)
        })
    }

    /// Appends `rdata`.
    pub fn push(&mut self, rdata: &RData) -> Result<(), PackError> {
        let wire = encode(rdata)?;
        self.push_encoded(rdata.record_type(), wire.as_slice())
    }

    /// Appends a record of `rtype` whose wire form is `wire`.
    pub fn push_encoded(&mut self, rtype: RecordType, wire: &[u8]) -> Result<(), PackError> {
        *self = self.pushed(rtype, wire)?;
        Ok(())
    }

    /// These records and one more, of `rtype` with wire form `wire` (one
    /// copy of the set: it is shared with the zone's earlier versions).
    pub fn pushed(&self, rtype: RecordType, wire: &[u8]) -> Result<Self, PackError> {
        let count = self.len();
        let count = u16::try_from(count + 1).map_err(|_| PackError { rtype })?;
        let len = u16::try_from(wire.len()).map_err(|_| PackError { rtype })?;
        let mut out = Vec::with_capacity(self.0.as_slice().len().max(2) + 2 + wire.len());
        match self.0.as_slice().is_empty() {
            true => out.extend_from_slice(&[0, 0]),
            false => out.extend_from_slice(self.0.as_slice()),
        }
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(wire);
        out[..2].copy_from_slice(&count.to_be_bytes());
        Ok(PackedRdatas(InlineBytes::from_vec(out)))
    }

    /// Removes the `index`th record.
    pub fn remove(&mut self, index: usize) {
        let count = self.len();
        if index >= count {
            return;
        }
        if count == 1 {
            self.0 = InlineBytes::default();
            return;
        }
        let mut out = Vec::with_capacity(self.0.as_slice().len());
        out.extend_from_slice(&((count - 1) as u16).to_be_bytes());
        for (i, w) in self.wire().enumerate() {
            if i != index {
                out.extend_from_slice(&(w.len() as u16).to_be_bytes());
                out.extend_from_slice(w);
            }
        }
        self.0 = InlineBytes::from_vec(out);
    }
}

/// `a == b`, compared in line when short: a set of a service's thousand
/// addresses is scanned for every member added, and a `memcmp` call per
/// four-byte address cost more than the comparison (with the copy of the
/// set, most of a restart's catch-up from the journal at a million
/// instances).
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() <= 16 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    a == b
}

impl std::fmt::Debug for PackedRdatas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.wire()).finish()
    }
}

/// Iterator over packed records' wire forms.
#[derive(Clone)]
pub struct WireRdatas<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for WireRdatas<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let len = u16::from_be_bytes(self.rest.get(..2)?.try_into().ok()?) as usize;
        let (w, rest) = self.rest[2..].split_at(len);
        self.rest = rest;
        Some(w)
    }
}

/// Decodes one record packed by this module. Packing wrote what hickory
/// reads back, so a failure is a bug; it yields the bytes as an unknown
/// record rather than a panic on the query path.
pub fn decode(rtype: RecordType, wire: &[u8]) -> RData {
    let mut d = BinDecoder::new(wire);
    RData::read(&mut d, rtype, Restrict::new(wire.len() as u16)).unwrap_or_else(|e| {
        debug_assert!(false, "packed {rtype} record does not decode: {e}");
        RData::Unknown {
            code: rtype,
            rdata: hickory_proto::rr::rdata::NULL::with(wire.to_vec()),
        }
    })
}

/// Whether RDATA of `rtype` may hold a name (whose case equality ignores).
fn has_names(rtype: RecordType) -> bool {
    !matches!(rtype, RecordType::A | RecordType::AAAA | RecordType::TXT)
}

/// Types whose RDATA is fixed fields and uncompressed domain names, equal
/// (as `RData` compares) only when their wire forms are equal but for the
/// ASCII case of the names' letters: a label's length byte is below 64,
/// never a letter, and the fixed fields compare exactly.
pub(super) fn folds_names_only(rtype: RecordType) -> bool {
    matches!(
        rtype,
        RecordType::SRV
            | RecordType::MX
            | RecordType::NS
            | RecordType::CNAME
            | RecordType::PTR
            | RecordType::ANAME
    )
}

fn append(out: &mut Vec<u8>, rdata: &RData) -> Result<(), PackError> {
    let wire = encode(rdata)?;
    let wire = wire.as_slice();
    let len = u16::try_from(wire.len()).map_err(|_| PackError {
        rtype: rdata.record_type(),
    })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(wire);
    Ok(())
}

/// A record's RDATA in wire form; addresses without an allocation.
pub enum Encoded {
    Address([u8; 16], u8),
    Other(Vec<u8>),
}

impl Encoded {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Encoded::Address(b, len) => &b[..*len as usize],
            Encoded::Other(v) => v,
        }
    }
}

/// `rdata` in wire form, names uncompressed with their case.
pub fn encode(rdata: &RData) -> Result<Encoded, PackError> {
    match rdata {
        RData::A(a) => {
            let mut b = [0; 16];
            b[..4].copy_from_slice(&a.0.octets());
            return Ok(Encoded::Address(b, 4));
        }
        RData::AAAA(a) => return Ok(Encoded::Address(a.0.octets(), 16)),
        _ => {}
    }
    let err = || PackError {
        rtype: rdata.record_type(),
    };
    // A fresh encoder: its offsets (and so its limits) start at the record.
    let mut wire = Vec::with_capacity(32);
    let mut enc = BinEncoder::new(&mut wire);
    enc.set_name_encoding(NameEncoding::Uncompressed);
    rdata.emit(&mut enc).map_err(|_| err())?;
    u16::try_from(wire.len()).map_err(|_| err())?;
    Ok(Encoded::Other(wire))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, CNAME, SRV, TXT};
    use hickory_proto::rr::Name;

    fn name(s: &str) -> Name {
        // from_ascii keeps case (from_str folds it, as IDNA does).
        Name::from_ascii(s).unwrap()
    }

    #[test]
    fn records_come_back_as_they_went_in_with_their_case() {
        let set = [
            RData::SRV(SRV::new(0, 10, 8080, name("I1.Inst.Example."))),
            RData::SRV(SRV::new(1, 20, 8081, name("i2.inst.example."))),
        ];
        let packed = PackedRdatas::pack(&set).unwrap();
        assert_eq!(packed.len(), 2);
        let back: Vec<RData> = packed.decoded(RecordType::SRV).collect();
        assert_eq!(back, set);
        // Case is kept (RData's equality ignores it).
        let RData::SRV(srv) = &back[0] else {
            panic!("not SRV: {:?}", back[0]);
        };
        assert_eq!(srv.target.to_string(), "I1.Inst.Example.");
        // An A record costs its two-byte length and four bytes.
        let a = PackedRdatas::pack(&[RData::A(A::new(192, 0, 2, 1))]).unwrap();
        assert_eq!(a.as_bytes(), &[0, 1, 0, 4, 192, 0, 2, 1]);
    }

    #[test]
    fn names_in_records_are_never_compressed_against_each_other() {
        // Two names sharing a suffix inside one set: a pointer would be
        // relative to the packing buffer and mean nothing to a reply.
        let set = [
            RData::CNAME(CNAME(name("a.example.com."))),
            RData::CNAME(CNAME(name("b.example.com."))),
        ];
        let packed = PackedRdatas::pack(&set).unwrap();
        for w in packed.wire() {
            assert_eq!(w.len(), 15, "uncompressed: {w:?}");
        }
    }

    #[test]
    fn position_push_and_remove_keep_the_framing() {
        let r = |i: u8| RData::A(A::new(10, 0, 0, i));
        let mut p = PackedRdatas::default();
        assert!(p.is_empty());
        for i in 1..=3 {
            p.push(&r(i)).unwrap();
        }
        assert_eq!(p.position(&r(2)), Some(1));
        assert_eq!(p.position(&r(9)), None);
        p.remove(1);
        assert_eq!(
            p.decoded(RecordType::A).collect::<Vec<_>>(),
            vec![r(1), r(3)]
        );
        p.remove(0);
        p.remove(0);
        assert!(p.is_empty() && p.as_bytes().is_empty());
        assert_eq!(PackedRdatas::from_packed(p.as_bytes()), Some(p));
    }

    #[test]
    fn equality_ignores_name_case_but_not_text_case() {
        let p = PackedRdatas::pack(&[RData::CNAME(CNAME(name("www.example.com.")))]).unwrap();
        assert_eq!(
            p.position(&RData::CNAME(CNAME(name("WWW.example.COM.")))),
            Some(0)
        );
        let t = PackedRdatas::pack(&[RData::TXT(TXT::new(vec!["abc".into()]))]).unwrap();
        assert_eq!(t.position(&RData::TXT(TXT::new(vec!["ABC".into()]))), None);
    }

    #[test]
    fn a_set_of_targets_finds_its_member_whatever_the_case() {
        // Same-length targets that differ in a letter, a digit or a fixed
        // field: only the one equal under name case folding is found.
        let srv = |port: u16, target: &str| RData::SRV(SRV::new(0, 10, port, name(target)));
        let set: Vec<RData> = (0..50)
            .map(|i| srv(8000 + i, &format!("i{:02}.svc.example.", i)))
            .collect();
        let p = PackedRdatas::pack(&set).unwrap();
        assert_eq!(p.position(&srv(8007, "I07.SVC.Example.")), Some(7));
        assert_eq!(p.position(&srv(8007, "i07.svc.example.")), Some(7));
        assert_eq!(p.position(&srv(8008, "I07.SVC.Example.")), None);
        assert_eq!(p.position(&srv(8007, "i70.svc.example.")), None);
        // A port whose byte is a letter's, in the other case: not equal.
        let (upper, lower) = (srv(0x4100, "a.example."), srv(0x6100, "a.example."));
        let q = PackedRdatas::pack(&[upper]).unwrap();
        assert_eq!(q.position(&lower), None);
        assert_eq!(q.position(&srv(0x4100, "A.EXAMPLE.")), Some(0));
    }

    #[test]
    fn damaged_framing_is_refused() {
        let p = PackedRdatas::pack(&[RData::A(A::new(192, 0, 2, 1))]).unwrap();
        let bytes = p.as_bytes();
        assert!(PackedRdatas::from_packed(&bytes[..bytes.len() - 1]).is_none());
        let mut two = bytes.to_vec();
        two[1] = 2;
        assert!(PackedRdatas::from_packed(&two).is_none());
        assert!(PackedRdatas::from_packed(&[0, 0]).is_none());
    }
}
