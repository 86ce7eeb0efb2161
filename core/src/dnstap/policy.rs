//! What is tapped: the fallback's messages one in N, the kernel's
//! outcomes one in N per [`Kind`], only for names in the listed zones
//! when any are listed.

use hickory_proto::rr::{LowerName, Name};

pub use xdpdns_common::tap::kind;

/// The kernel's sampled outcomes (see `xdpdns_common::tap::kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Answer,
    Negative,
    Limited,
    Passed,
}

impl Kind {
    pub fn from_u32(v: u32) -> Option<Kind> {
        Some(match v {
            kind::ANSWER => Kind::Answer,
            kind::NEGATIVE => Kind::Negative,
            kind::LIMITED => Kind::Limited,
            kind::PASSED => Kind::Passed,
            _ => return None,
        })
    }

    pub fn label(self) -> &'static str {
        match self {
            Kind::Answer => "answer",
            Kind::Negative => "negative",
            Kind::Limited => "limited",
            Kind::Passed => "passed",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// The fallback's queries and responses: one exchange in this many
    /// (0: none, 1: all).
    pub fallback_every: u32,
    /// Write queries, responses, or both.
    pub queries: bool,
    pub responses: bool,
    /// The kernel's outcomes by [`kind`]: one in this many (0: none).
    pub kernel_every: [u32; kind::COUNT],
    /// Only names at or below these (none: every name).
    pub zones: Vec<LowerName>,
}

impl Policy {
    /// Whether exchange number `seq` of the fallback is tapped (before
    /// the zone filter).
    pub fn fallback_sampled(&self, seq: u64) -> bool {
        match self.fallback_every {
            0 => false,
            n => seq.is_multiple_of(u64::from(n)),
        }
    }

    pub fn any_fallback(&self) -> bool {
        self.fallback_every != 0 && (self.queries || self.responses)
    }

    /// Whether a message about `message`'s question is within the zones
    /// tapped. Messages with no readable question pass when no zone is
    /// listed.
    pub fn zone_matches(&self, message: &[u8]) -> bool {
        if self.zones.is_empty() {
            return true;
        }
        let Some(name) = question_name(message) else {
            return false;
        };
        self.zones.iter().any(|z| z.zone_of(&name))
    }
}

/// The question's name of a DNS message.
pub fn question_name(message: &[u8]) -> Option<LowerName> {
    if message.len() < 12 || u16::from_be_bytes([message[4], message[5]]) == 0 {
        return None;
    }
    let mut labels: Vec<&[u8]> = Vec::new();
    let mut at = 12;
    loop {
        let len = *message.get(at)? as usize;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        labels.push(message.get(at + 1..at + 1 + len)?);
        at += 1 + len;
    }
    let name = Name::from_labels(labels).ok()?;
    Some(LowerName::new(&name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::RecordType;

    fn query(name: &str) -> Vec<u8> {
        let mut m = Message::query();
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
        m.to_vec().unwrap()
    }

    #[test]
    fn zones_filter_by_the_question_name() {
        let zone = |z: &str| LowerName::new(&Name::from_ascii(z).unwrap());
        let mut p = Policy::default();
        assert!(p.zone_matches(&query("www.example.com.")));
        assert!(p.zone_matches(b"short"));
        p.zones = vec![zone("Example.COM.")];
        assert!(p.zone_matches(&query("WWW.example.com.")));
        assert!(p.zone_matches(&query("example.com.")));
        assert!(!p.zone_matches(&query("www.example.org.")));
        assert!(!p.zone_matches(&query("notexample.com.")));
        assert!(!p.zone_matches(b"short"));
    }

    #[test]
    fn one_in_n_and_thresholds() {
        let mut p = Policy::default();
        assert!(!p.fallback_sampled(0));
        p.fallback_every = 1;
        assert!((0..10).all(|s| p.fallback_sampled(s)));
        p.fallback_every = 4;
        assert_eq!((0..100).filter(|s| p.fallback_sampled(*s)).count(), 25);
        // The kernel's gaps: uniform from 0 to 2N - 2, mean N - 1.
        use xdpdns_common::tap::skip_after_sample;
        assert_eq!(skip_after_sample(0, 7), 0);
        assert_eq!(skip_after_sample(1, 7), 0);
        let gaps: Vec<u32> = (0..199u32).map(|r| skip_after_sample(100, r)).collect();
        assert_eq!(gaps.iter().max(), Some(&198));
        assert_eq!(gaps.iter().sum::<u32>() / 199, 99);
        assert_eq!(Kind::from_u32(kind::PASSED), Some(Kind::Passed));
        assert_eq!(Kind::from_u32(9), None);
    }
}
