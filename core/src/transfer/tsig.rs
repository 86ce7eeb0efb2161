//! TSIG (RFC 8945) for transfers and NOTIFY: verifying signed requests,
//! signing replies (a transfer's messages are chained, each MAC covering
//! the previous one), and the error replies BADKEY/BADSIG/BADTIME.
//! HMAC and the wire details of the TSIG RR come from hickory-proto.

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::tsig::{
    make_tsig_record, signed_bitmessage_to_buf, TsigAlgorithm, TsigError, TSIG,
};
pub use hickory_proto::rr::TSigner;
use hickory_proto::rr::{LowerName, Name};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

/// Allowed clock difference, in seconds (RFC 8945 recommends 300).
pub const FUDGE: u16 = 300;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("{0:?} is not a DNS name")]
    Name(String),
    #[error("algorithm {0:?} is not supported (hmac-sha256, hmac-sha384, hmac-sha512)")]
    Algorithm(String),
    #[error("secret is not valid base64")]
    Secret,
}

/// Builds a signer from configuration strings.
pub fn make_key(name: &str, algorithm: &str, secret_b64: &str) -> Result<TSigner, KeyError> {
    let name = Name::from_ascii(name).map_err(|_| KeyError::Name(name.to_string()))?;
    let alg = match algorithm.to_ascii_lowercase().trim_end_matches('.') {
        "hmac-sha256" => TsigAlgorithm::HmacSha256,
        "hmac-sha384" => TsigAlgorithm::HmacSha384,
        "hmac-sha512" => TsigAlgorithm::HmacSha512,
        _ => return Err(KeyError::Algorithm(algorithm.to_string())),
    };
    let secret = data_encoding::BASE64
        .decode(secret_b64.trim().as_bytes())
        .map_err(|_| KeyError::Secret)?;
    TSigner::new(secret, alg, name, FUDGE).map_err(|_| KeyError::Algorithm(algorithm.into()))
}

/// The configured keys, found by name.
#[derive(Clone, Default)]
pub struct Keyring {
    keys: Vec<TSigner>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .keys
            .iter()
            .map(|k| k.signer_name().to_string())
            .collect();
        f.debug_struct("Keyring").field("keys", &names).finish()
    }
}

impl Keyring {
    pub fn new(keys: Vec<TSigner>) -> Keyring {
        Keyring { keys }
    }

    pub fn get(&self, name: &Name) -> Option<&TSigner> {
        let mut name = name.clone();
        name.set_fqdn(true);
        let want = LowerName::new(&name);
        self.keys
            .iter()
            .find(|k| LowerName::new(k.signer_name()) == want)
    }

    /// By configured name (`"xfr-key"` or `"xfr-key."`).
    pub fn by_name(&self, name: &str) -> Option<&TSigner> {
        let mut n = Name::from_ascii(name).ok()?;
        n.set_fqdn(true);
        self.get(&n)
    }
}

/// A request whose signature verified: what its replies are signed with.
#[derive(Clone)]
pub struct Verified {
    pub signer: TSigner,
    pub request_mac: Vec<u8>,
}

impl Verified {
    pub fn key_name(&self) -> &Name {
        self.signer.signer_name()
    }
}

/// Why a signed request was not accepted, and the NOTAUTH reply to send.
#[derive(Debug)]
pub struct Rejection {
    pub error: TsigError,
    pub key: Name,
    pub reply: Vec<u8>,
}

/// Verifies the TSIG of a request (RFC 8945 §5.2): key, then MAC, then
/// time. `Ok(None)` when the message is not signed.
pub fn verify_request(
    keyring: &Keyring,
    packet: &[u8],
    now: u64,
) -> Result<Option<Verified>, Rejection> {
    let Ok((tbv, rr)) = signed_bitmessage_to_buf(packet, None, true) else {
        return Ok(None);
    };
    let tsig = &rr.data;
    let reject = |error, reply| Rejection {
        error,
        key: rr.name.clone(),
        reply,
    };
    let Some(signer) = keyring
        .get(&rr.name)
        .filter(|s| *s.algorithm() == tsig.algorithm)
    else {
        // Unknown key or algorithm: NOTAUTH/BADKEY, unsigned.
        let reply = unsigned_error(packet, &rr.name, tsig, TsigError::BadKey, now);
        return Err(reject(TsigError::BadKey, reply));
    };
    // Truncated MACs (RFC 8945 §5.2.2.1) are not accepted.
    let full_len = match tsig.algorithm {
        TsigAlgorithm::HmacSha256 => 32,
        TsigAlgorithm::HmacSha384 => 48,
        TsigAlgorithm::HmacSha512 => 64,
        _ => usize::MAX,
    };
    if tsig.mac.len() != full_len || signer.verify(&tbv, &tsig.mac).is_err() {
        let reply = unsigned_error(packet, &rr.name, tsig, TsigError::BadSig, now);
        return Err(reject(TsigError::BadSig, reply));
    }
    if now.abs_diff(tsig.time) > u64::from(tsig.fudge) {
        // BADTIME is signed, and carries our clock in Other Data.
        let mut signer = ReplySigner::new(&Verified {
            signer: signer.clone(),
            request_mac: tsig.mac.clone(),
        });
        signer.error = Some(TsigError::BadTime);
        signer.other = (now & 0xffff_ffff_ffff).to_be_bytes()[2..].to_vec();
        let reply = signer.sign(error_header(packet), now);
        return Err(reject(TsigError::BadTime, reply));
    }
    Ok(Some(Verified {
        signer: signer.clone(),
        request_mac: tsig.mac.clone(),
    }))
}

/// Signs the messages of one reply. The first MAC covers the request's MAC
/// and all TSIG variables; each later one (a multi-message transfer) covers
/// the previous MAC, the message and the timers (RFC 8945 §5.3.1).
pub struct ReplySigner {
    signer: TSigner,
    prior_mac: Vec<u8>,
    first: bool,
    error: Option<TsigError>,
    other: Vec<u8>,
}

impl ReplySigner {
    pub fn new(v: &Verified) -> ReplySigner {
        ReplySigner {
            signer: v.signer.clone(),
            prior_mac: v.request_mac.clone(),
            first: true,
            error: None,
            other: Vec::new(),
        }
    }

    /// Appends a TSIG RR to the encoded message `msg`.
    pub fn sign(&mut self, msg: Vec<u8>, now: u64) -> Vec<u8> {
        let oid = u16::from_be_bytes([msg[0], msg[1]]);
        let tsig = TSIG::new(
            self.signer.algorithm().clone(),
            now,
            self.signer.fudge(),
            Vec::new(),
            oid,
            self.error,
            self.other.clone(),
        );
        let mut tbs = Vec::with_capacity(msg.len() + self.prior_mac.len() + 128);
        {
            let mut enc = BinEncoder::new(&mut tbs);
            let emitted = enc
                .emit_u16(self.prior_mac.len() as u16)
                .and_then(|_| enc.emit_vec(&self.prior_mac))
                .and_then(|_| enc.emit_vec(&msg));
            emitted.expect("writing to a Vec");
            if self.first {
                tsig.emit_tsig_for_mac(&mut enc, self.signer.signer_name())
                    .expect("writing to a Vec");
            } else {
                enc.emit_u16((now >> 32) as u16)
                    .and_then(|_| enc.emit_u32(now as u32))
                    .and_then(|_| enc.emit_u16(self.signer.fudge()))
                    .expect("writing to a Vec");
            }
        }
        let mac = self.signer.sign(&tbs).expect("supported algorithm");
        self.prior_mac.clone_from(&mac);
        self.first = false;
        append_tsig(msg, self.signer.signer_name().clone(), tsig.set_mac(mac))
    }
}

/// Adds a TSIG RR as the last additional record.
fn append_tsig(mut msg: Vec<u8>, key: Name, tsig: TSIG) -> Vec<u8> {
    let record = make_tsig_record(key, tsig);
    let mut rr = Vec::with_capacity(128);
    record
        .emit(&mut BinEncoder::new(&mut rr))
        .expect("a TSIG RR always encodes");
    msg.extend_from_slice(&rr);
    let arcount = u16::from_be_bytes([msg[10], msg[11]]).wrapping_add(1);
    msg[10..12].copy_from_slice(&arcount.to_be_bytes());
    msg
}

/// A NOTAUTH reply to `packet`: header and question, no records yet.
fn error_header(packet: &[u8]) -> Vec<u8> {
    let mut reply = match Message::from_vec(packet) {
        Ok(req) => {
            let mut m = Message::new(req.id, MessageType::Response, req.op_code);
            m.metadata.response_code = ResponseCode::NotAuth;
            m.queries = req.queries;
            m.to_vec().unwrap_or_default()
        }
        Err(_) => Vec::new(),
    };
    if reply.len() < 12 {
        reply = crate::wire::header_only_reply(packet, ResponseCode::NotAuth);
    }
    reply
}

/// BADKEY and BADSIG replies carry an unsigned TSIG (empty MAC).
fn unsigned_error(packet: &[u8], key: &Name, req: &TSIG, error: TsigError, now: u64) -> Vec<u8> {
    let oid = u16::from_be_bytes([packet[0], packet[1]]);
    let tsig = TSIG::new(
        req.algorithm.clone(),
        now,
        req.fudge,
        Vec::new(),
        oid,
        Some(error),
        Vec::new(),
    );
    append_tsig(error_header(packet), key.clone(), tsig)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::RecordType;

    const SECRET: &str = "c2VjcmV0LWtleS1mb3ItdGVzdHMtMTIzNDU2Nzg5MA==";

    fn key(name: &str, secret: &str) -> TSigner {
        make_key(name, "hmac-sha256", secret).unwrap()
    }

    fn signed_query(signer: &TSigner, time: u64) -> (Vec<u8>, hickory_proto::rr::TSigVerifier) {
        let mut m = Message::query();
        m.metadata.id = 0x1234;
        m.add_query(Query::query(
            Name::from_ascii("example.com.").unwrap(),
            RecordType::AXFR,
        ));
        let verifier = m.finalize(signer, time).unwrap().unwrap();
        (m.to_vec().unwrap(), verifier)
    }

    fn rcode_and_tsig_error(reply: &[u8]) -> (ResponseCode, Option<TsigError>) {
        let m = Message::from_vec(reply).unwrap();
        let err = m.signature().and_then(|s| s.data.error);
        (m.metadata.response_code, err)
    }

    #[test]
    fn a_good_signature_verifies_and_the_chained_reply_verifies_at_the_client() {
        let k = key("xfr.", SECRET);
        let ring = Keyring::new(vec![k.clone()]);
        let now = 1_700_000_000;
        let (q, mut client) = signed_query(&k, now);
        let v = verify_request(&ring, &q, now + 10)
            .unwrap()
            .expect("signed");
        assert_eq!(v.key_name().to_ascii(), "xfr.");
        // Three reply messages, as in a multi-message AXFR.
        let mut signer = ReplySigner::new(&v);
        for i in 0..3u8 {
            let mut m = Message::new(
                0x1234,
                MessageType::Response,
                hickory_proto::op::OpCode::Query,
            );
            m.add_answer(hickory_proto::rr::Record::from_rdata(
                Name::from_ascii("a.example.com.").unwrap(),
                60,
                hickory_proto::rr::RData::A(hickory_proto::rr::rdata::A::new(192, 0, 2, i)),
            ));
            let bytes = signer.sign(m.to_vec().unwrap(), now + 10 + u64::from(i));
            client.verify(&bytes).expect("client accepts message");
        }
    }

    #[test]
    fn unsigned_requests_pass_through() {
        let ring = Keyring::new(vec![key("xfr.", SECRET)]);
        let mut m = Message::query();
        m.add_query(Query::query(
            Name::from_ascii("x.").unwrap(),
            RecordType::SOA,
        ));
        assert!(verify_request(&ring, &m.to_vec().unwrap(), 0)
            .unwrap()
            .is_none());
    }

    #[test]
    fn unknown_key_wrong_secret_and_stale_time_are_notauth() {
        let good = key("xfr.", SECRET);
        let ring = Keyring::new(vec![good.clone()]);
        let now = 1_700_000_000;

        let (q, _) = signed_query(&key("other.", SECRET), now);
        let r = verify_request(&ring, &q, now).err().expect("rejected");
        assert_eq!(r.error, TsigError::BadKey);
        assert_eq!(
            rcode_and_tsig_error(&r.reply),
            (ResponseCode::NotAuth, Some(TsigError::BadKey))
        );

        let (q, _) = signed_query(&key("xfr.", "d3Jvbmctc2VjcmV0"), now);
        let r = verify_request(&ring, &q, now).err().expect("rejected");
        assert_eq!(r.error, TsigError::BadSig);
        assert_eq!(
            rcode_and_tsig_error(&r.reply),
            (ResponseCode::NotAuth, Some(TsigError::BadSig))
        );

        let (q, mut client) = signed_query(&good, now - 1000);
        let r = verify_request(&ring, &q, now).err().expect("rejected");
        assert_eq!(r.error, TsigError::BadTime);
        let m = Message::from_vec(&r.reply).unwrap();
        let sig = m.signature().unwrap();
        assert_eq!(sig.data.error, Some(TsigError::BadTime));
        assert_eq!(
            sig.data.other,
            (now & 0xffff_ffff_ffff).to_be_bytes()[2..].to_vec()
        );
        assert!(!sig.data.mac.is_empty(), "BADTIME replies are signed");
        // The client's verifier rejects it on time, not on the MAC.
        let err = client
            .verify(&r.reply)
            .map(|_| ())
            .expect_err("a BADTIME reply is not accepted")
            .to_string();
        assert!(err.contains("outdated"), "{err}");
    }

    #[test]
    fn tampering_breaks_the_signature() {
        let k = key("xfr.", SECRET);
        let ring = Keyring::new(vec![k.clone()]);
        let (mut q, _) = signed_query(&k, 100);
        q[13] ^= 0x20; // flip the case of a question byte
        assert_eq!(
            verify_request(&ring, &q, 100).err().unwrap().error,
            TsigError::BadSig
        );
    }

    #[test]
    fn bad_key_config_is_rejected() {
        assert_eq!(
            make_key("k", "hmac-md5", SECRET).err(),
            Some(KeyError::Algorithm("hmac-md5".into()))
        );
        assert_eq!(
            make_key("k", "hmac-sha256", "!!!").err(),
            Some(KeyError::Secret)
        );
    }
}
