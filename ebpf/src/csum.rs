//! Internet checksum (RFC 1071) arithmetic: sums are kept wide and folded
//! once at the end.

/// Folds a wide ones'-complement sum to 16 bits.
#[inline(always)]
pub fn fold(mut sum: u64) -> u16 {
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// Sum of a byte string that starts at an odd offset: the byte-swapped sum
/// of the same string at an even offset (RFC 1071 §2(B)).
#[inline(always)]
pub fn at_parity(sum16: u16, odd: bool) -> u64 {
    if odd {
        sum16.swap_bytes() as u64
    } else {
        sum16 as u64
    }
}

/// Sum of big-endian 16-bit words of `bytes` (even length, even offset).
#[inline(always)]
pub fn words<const N: usize>(bytes: &[u8; N]) -> u64 {
    let mut sum = 0u64;
    let mut i = 0;
    while i + 1 < N {
        sum += u16::from_be_bytes([bytes[i], bytes[i + 1]]) as u64;
        i += 2;
    }
    sum
}
