//! DNS server cookies (RFC 7873 with the interoperable construction of
//! RFC 9018 §4): one implementation, compiled into both the XDP program
//! and the fallback server, so a cookie minted by one path validates in
//! the other.
//!
//! Server Cookie = Version (1) | Reserved (3, zero) | Timestamp (4, unix
//! seconds) | Hash (8), where Hash = SipHash-2-4 keyed by the server
//! secret over Client Cookie | Version | Reserved | Timestamp | Client IP.
//! Written without slices or loops over variable lengths so the kernel
//! verifier sees straight-line code.

/// Version byte of the RFC 9018 construction.
pub const VERSION: u8 = 1;
/// Length of a client cookie.
pub const CLIENT_LEN: usize = 8;
/// Length of the server cookies this construction mints.
pub const SERVER_LEN: usize = 16;
/// A cookie older than this is replaced in the reply (RFC 9018 §4.3).
pub const REFRESH_AFTER_SECS: u32 = 1800;
/// A cookie older than this is not valid (RFC 9018 §4.3).
pub const VALID_PAST_SECS: u32 = 3600;
/// A cookie this far in the future is still valid (clock skew in an
/// anycast set; RFC 9018 §4.3).
pub const VALID_FUTURE_SECS: u32 = 300;

/// SipHash key words of a 16-byte secret (little-endian halves).
#[inline(always)]
pub fn key_words(secret: &[u8; 16]) -> [u64; 2] {
    let mut k0 = [0u8; 8];
    let mut k1 = [0u8; 8];
    k0.copy_from_slice(&secret[..8]);
    k1.copy_from_slice(&secret[8..]);
    [u64::from_le_bytes(k0), u64::from_le_bytes(k1)]
}

#[inline(always)]
fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

#[inline(always)]
fn compress(v: &mut [u64; 4], m: u64) {
    v[3] ^= m;
    round(v);
    round(v);
    v[0] ^= m;
}

#[inline(always)]
fn init(key: [u64; 2]) -> [u64; 4] {
    [
        key[0] ^ 0x736f_6d65_7073_6575,
        key[1] ^ 0x646f_7261_6e64_6f6d,
        key[0] ^ 0x6c79_6765_6e65_7261,
        key[1] ^ 0x7465_6462_7974_6573,
    ]
}

#[inline(always)]
fn finish(mut v: [u64; 4]) -> u64 {
    v[2] ^= 0xff;
    round(&mut v);
    round(&mut v);
    round(&mut v);
    round(&mut v);
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// The client address as SipHash input: IPv4 is the 4-byte tail of a
/// 20-byte message, IPv6 two more words of a 32-byte one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpWords {
    V4(u32),
    V6(u64, u64),
}

/// The hash as a word, from words (what the XDP program calls: no byte
/// arrays, so nothing on its small stack).
#[inline(always)]
pub fn hash_words(key: [u64; 2], client: u64, timestamp: u32, ip: IpWords) -> u64 {
    let mut v = init(key);
    compress(&mut v, client);
    // Version, three reserved zero bytes, then the timestamp big-endian.
    compress(
        &mut v,
        VERSION as u64 | (timestamp.swap_bytes() as u64) << 32,
    );
    match ip {
        IpWords::V4(a) => compress(&mut v, a as u64 | 20u64 << 56),
        IpWords::V6(lo, hi) => {
            compress(&mut v, lo);
            compress(&mut v, hi);
            compress(&mut v, 32u64 << 56);
        }
    }
    finish(v)
}

/// Hash of a cookie for an IPv4 client (a 20-byte message).
#[inline(always)]
pub fn hash_v4(key: [u64; 2], client: [u8; CLIENT_LEN], timestamp: u32, ip: [u8; 4]) -> [u8; 8] {
    ClientIp::V4(ip).hash(key, client, timestamp)
}

/// Hash of a cookie for an IPv6 client (a 32-byte message).
#[inline(always)]
pub fn hash_v6(key: [u64; 2], client: [u8; CLIENT_LEN], timestamp: u32, ip: [u8; 16]) -> [u8; 8] {
    ClientIp::V6(ip).hash(key, client, timestamp)
}

/// The server cookie bytes for `hash` minted at `timestamp`.
#[inline(always)]
pub fn server_cookie(timestamp: u32, hash: [u8; 8]) -> [u8; SERVER_LEN] {
    let t = timestamp.to_be_bytes();
    [
        VERSION, 0, 0, 0, t[0], t[1], t[2], t[3], hash[0], hash[1], hash[2], hash[3], hash[4],
        hash[5], hash[6], hash[7],
    ]
}

/// What a received server cookie's timestamp means at `now` (serial
/// number arithmetic, RFC 1982, as RFC 9018 §4.3 asks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Age {
    /// Valid and recent: echo it.
    Fresh,
    /// Valid but older than half an hour: answer with a new one.
    Stale,
    /// Too old or too far in the future: treat as absent.
    Invalid,
}

#[inline(always)]
pub fn age(timestamp: u32, now: u32) -> Age {
    let past = now.wrapping_sub(timestamp);
    if past as i32 >= 0 {
        if past > VALID_PAST_SECS {
            Age::Invalid
        } else if past > REFRESH_AFTER_SECS {
            Age::Stale
        } else {
            Age::Fresh
        }
    } else if timestamp.wrapping_sub(now) > VALID_FUTURE_SECS {
        Age::Invalid
    } else {
        Age::Fresh
    }
}

/// The client address as hashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientIp {
    V4([u8; 4]),
    V6([u8; 16]),
}

impl ClientIp {
    #[inline(always)]
    pub fn words(&self) -> IpWords {
        match self {
            ClientIp::V4(a) => IpWords::V4(u32::from_le_bytes(*a)),
            ClientIp::V6(a) => {
                let mut lo = [0u8; 8];
                let mut hi = [0u8; 8];
                lo.copy_from_slice(&a[..8]);
                hi.copy_from_slice(&a[8..]);
                IpWords::V6(u64::from_le_bytes(lo), u64::from_le_bytes(hi))
            }
        }
    }

    #[inline(always)]
    fn hash(&self, key: [u64; 2], client: [u8; CLIENT_LEN], timestamp: u32) -> [u8; 8] {
        hash_words(key, u64::from_le_bytes(client), timestamp, self.words()).to_le_bytes()
    }
}

/// A server cookie minted now with `key`.
#[inline(always)]
pub fn mint(key: [u64; 2], client: [u8; CLIENT_LEN], now: u32, ip: &ClientIp) -> [u8; SERVER_LEN] {
    server_cookie(now, ip.hash(key, client, now))
}

/// The server cookie a reply carries, as words: it is
/// `server_cookie(timestamp, hash.to_le_bytes())`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub timestamp: u32,
    pub hash: u64,
    /// The query's server cookie was valid (the basis for rate-limit
    /// exemption).
    pub valid: bool,
}

/// The decision of [`reply`] on words. `received` is the query's server
/// cookie as (timestamp, hash) when it had this construction's length,
/// version and reserved bytes.
#[inline(always)]
pub fn reply_words(
    keys: &[[u64; 2]; 2],
    previous: bool,
    client: u64,
    received: Option<(u32, u64)>,
    now: u32,
    ip: IpWords,
) -> Verdict {
    let fresh = |valid| Verdict {
        timestamp: now,
        hash: hash_words(keys[0], client, now, ip),
        valid,
    };
    if let Some((ts, theirs)) = received {
        let age = age(ts, now);
        if age != Age::Invalid {
            if hash_words(keys[0], client, ts, ip) == theirs {
                if age == Age::Fresh {
                    return Verdict {
                        timestamp: ts,
                        hash: theirs,
                        valid: true,
                    };
                }
                return fresh(true);
            }
            if previous && hash_words(keys[1], client, ts, ip) == theirs {
                return fresh(true);
            }
        }
    }
    fresh(false)
}

/// Splits a received 16-byte server cookie into (timestamp, hash) when
/// it has this construction's version and reserved bytes.
#[inline(always)]
pub fn received_words(r: &[u8; SERVER_LEN]) -> Option<(u32, u64)> {
    if r[0] != VERSION || r[1] != 0 || r[2] != 0 || r[3] != 0 {
        return None;
    }
    let ts = u32::from_be_bytes([r[4], r[5], r[6], r[7]]);
    let hash = u64::from_le_bytes([r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]]);
    Some((ts, hash))
}

/// The server cookie a reply carries, and whether the query's own server
/// cookie was valid (the basis for rate-limit exemption). `received` is
/// the query's server cookie when it had this construction's length;
/// `keys[1]` is tried only when `previous` is set. A valid, fresh cookie
/// made with the current secret is echoed; anything else gets a new one
/// made with the current secret (RFC 9018 §4.3 and §5).
pub fn reply(
    keys: &[[u64; 2]; 2],
    previous: bool,
    client: [u8; CLIENT_LEN],
    received: Option<&[u8; SERVER_LEN]>,
    now: u32,
    ip: &ClientIp,
) -> ([u8; SERVER_LEN], bool) {
    let v = reply_words(
        keys,
        previous,
        u64::from_le_bytes(client),
        received.and_then(received_words),
        now,
        ip.words(),
    );
    (server_cookie(v.timestamp, v.hash.to_le_bytes()), v.valid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex<const N: usize>(s: &str) -> [u8; N] {
        let mut out = [0u8; N];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    /// RFC 9018 Appendix A: A.1, A.2 and A.3 (IPv4), A.4 (IPv6). The
    /// expected value is the whole COOKIE option payload.
    #[test]
    fn rfc9018_appendix_a_vectors() {
        let secret1: [u8; 16] = hex("e5e973e5a6b2a43f48e7dc849e37bfcf");
        let v4 = [
            (
                "2464c4abcf10c957",
                [198, 51, 100, 100],
                1559731985,
                "010000005cf79f111f8130c3eee29480",
            ),
            (
                "2464c4abcf10c957",
                [198, 51, 100, 100],
                1559734385,
                "010000005cf7a871d4a564a1442aca77",
            ),
            (
                "fc93fc62807ddb86",
                [203, 0, 113, 203],
                1559734700,
                "010000005cf7a9acf73a7810aca2381e",
            ),
        ];
        for (client, ip, ts, want) in v4 {
            let client: [u8; 8] = hex(client);
            let hash = hash_v4(key_words(&secret1), client, ts, ip);
            assert_eq!(server_cookie(ts, hash), hex::<16>(want), "ts {ts}");
        }
        let secret2: [u8; 16] = hex("445536bcd2513298075a5d379663c962");
        let ip6: [u8; 16] = hex("20010db80220000159ded0f4876982b8");
        let ts = 1559741961;
        let hash = hash_v6(key_words(&secret2), hex("22681ab97d52c298"), ts, ip6);
        assert_eq!(
            server_cookie(ts, hash),
            hex::<16>("010000005cf7c609a6bb79d16625507a")
        );
    }

    #[test]
    fn ages_follow_rfc9018_windows_across_the_u32_wrap() {
        assert_eq!(age(1000, 1000), Age::Fresh);
        assert_eq!(age(1000, 1000 + 1800), Age::Fresh);
        assert_eq!(age(1000, 1000 + 1801), Age::Stale);
        assert_eq!(age(1000, 1000 + 3600), Age::Stale);
        assert_eq!(age(1000, 1000 + 3601), Age::Invalid);
        assert_eq!(age(1300, 1000), Age::Fresh, "5 minutes ahead");
        assert_eq!(age(1301, 1000), Age::Invalid);
        assert_eq!(age(u32::MAX - 10, 20), Age::Fresh, "wraps");
        assert_eq!(age(20, u32::MAX - 10), Age::Fresh, "ahead across the wrap");
    }

    #[test]
    fn replies_echo_fresh_cookies_and_remint_the_rest() {
        let cur = key_words(&[1; 16]);
        let old = key_words(&[2; 16]);
        let keys = [cur, old];
        let ip = ClientIp::V6([7; 16]);
        let client = [9; 8];
        let t0 = 1_700_000_000;
        let minted = mint(cur, client, t0, &ip);
        assert_eq!(reply(&keys, true, client, None, t0, &ip), (minted, false));
        // Fresh: echoed, even a few seconds later.
        assert_eq!(
            reply(&keys, true, client, Some(&minted), t0 + 5, &ip),
            (minted, true)
        );
        // Older than half an hour: valid, replaced.
        let later = t0 + 1801;
        assert_eq!(
            reply(&keys, true, client, Some(&minted), later, &ip),
            (mint(cur, client, later, &ip), true)
        );
        // Expired, or another client's address: invalid, replaced.
        let late = t0 + 3601;
        assert!(!reply(&keys, true, client, Some(&minted), late, &ip).1);
        let other = ClientIp::V6([8; 16]);
        assert!(!reply(&keys, true, client, Some(&minted), t0, &other).1);
        // Made with the previous secret: valid during a rollover only.
        let by_old = mint(old, client, t0, &ip);
        assert_eq!(
            reply(&keys, true, client, Some(&by_old), t0, &ip),
            (minted, true)
        );
        assert!(!reply(&keys, false, client, Some(&by_old), t0, &ip).1);
    }
}
