//! A small deterministic mutation fuzzer (no toolchain beyond stable
//! Rust, so it runs in CI for a bounded number of executions): seeds are
//! mutated by bit flips, interesting values, insertions, deletions,
//! duplicated and spliced chunks and truncation. A failing input is
//! reproduced from the printed seed and execution number.

/// Executions per fuzz target: `XDPDNS_FUZZ_EXECS`, else `default`.
pub fn executions(default: u64) -> u64 {
    std::env::var("XDPDNS_FUZZ_EXECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The generator of one fuzz target: `default_seed`, varied by
/// `XDPDNS_FUZZ_SEED` for another campaign.
pub fn rng(default_seed: u64) -> Rng {
    let extra = std::env::var("XDPDNS_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    Rng::new(default_seed ^ extra.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// SplitMix64: fast, seedable, good enough to drive mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const INTERESTING: &[u8] = &[
    0, 1, 0x3f, 0x40, 0x7f, 0x80, 0xc0, 0xff, b'.', b'\\', b'"', b'\n',
];

/// `seed` with 1–4 random mutations; `other` is spliced from.
pub fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8], max_len: usize) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(9) {
            0 | 1 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            2 if len > 0 => {
                let i = rng.below(len);
                v[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            3 if len > 0 => {
                let i = rng.below(len);
                v[i] = rng.next() as u8;
            }
            4 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(i..i, bytes);
            }
            5 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(16));
                v.drain(i..i + n);
            }
            6 if len > 0 => {
                // Duplicate a chunk somewhere else (repeated labels, options).
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(32));
                let chunk = v[i..i + n].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, chunk);
            }
            7 if !other.is_empty() => {
                // Splice: our head, the other's tail.
                let cut = rng.below(v.len() + 1);
                let from = rng.below(other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            8 if len > 0 => v.truncate(rng.below(len)),
            _ => {}
        }
    }
    v.truncate(max_len);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_and_change_the_input() {
        let seed = b"hello fuzzing world";
        let run = |s: u64| {
            let mut rng = Rng::new(s);
            (0..100)
                .map(|_| mutate(&mut rng, seed, b"other", 64))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert!(run(7).iter().filter(|m| m.as_slice() != seed).count() > 90);
    }
}
