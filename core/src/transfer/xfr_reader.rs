//! The incoming-transfer reader: a pure state machine fed the answer
//! records of an AXFR or IXFR response, message by message, that says
//! what the transfer carried (a whole zone, diffs, or nothing new).

use hickory_proto::rr::{Name, RData, Record};

use crate::zone::serial::is_newer;
use crate::zone::ZoneDiff;

/// A transfer that breaks RFC 5936/1995 framing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum XfrError {
    #[error("the transfer does not start with the zone's SOA")]
    NoLeadingSoa,
    #[error("records after the end of the transfer")]
    AfterEnd,
    #[error("an incremental transfer diff lacks its new SOA")]
    DiffWithoutSoa,
    #[error("the transfer carries more than {0} records (transfer.max_transfer_in_records)")]
    TooLarge(usize),
}

/// What a transfer carried.
#[derive(Debug, PartialEq)]
pub enum XfrOutcome {
    /// The primary has nothing newer (IXFR answered with its SOA alone).
    UpToDate(u32),
    /// The whole zone (AXFR, or IXFR answered AXFR-style); SOA included once.
    Full(Vec<Record>),
    /// Difference sequences, oldest first, each with its SOAs.
    Incremental(Vec<ZoneDiff>),
}

enum State {
    Start,
    AfterFirst,
    Full(Vec<Record>),
    Deleting(ZoneDiff),
    Adding(ZoneDiff),
    Done(XfrOutcome),
}

/// Reads the answer records of a transfer, message by message.
pub struct XfrReader {
    zone: Name,
    ours: Option<u32>,
    /// Records read so far, and how many may come.
    records: usize,
    max_records: usize,
    first: Option<Record>,
    diffs: Vec<ZoneDiff>,
    state: State,
}

fn soa_serial(r: &Record) -> Option<u32> {
    match &r.data {
        RData::SOA(s) => Some(s.serial),
        _ => None,
    }
}

impl XfrReader {
    pub fn new(zone: Name, ours: Option<u32>) -> XfrReader {
        XfrReader {
            zone,
            ours,
            records: 0,
            max_records: usize::MAX,
            first: None,
            diffs: Vec::new(),
            state: State::Start,
        }
    }

    /// Refuses a transfer of more than `max` records as it arrives.
    pub fn with_max_records(mut self, max: usize) -> XfrReader {
        self.max_records = max;
        self
    }

    fn final_serial(&self) -> u32 {
        self.first.as_ref().and_then(soa_serial).unwrap_or(0)
    }

    pub fn push(&mut self, r: Record) -> Result<(), XfrError> {
        self.records += 1;
        if self.records > self.max_records {
            return Err(XfrError::TooLarge(self.max_records));
        }
        let end = self.final_serial();
        let soa = soa_serial(&r).filter(|_| r.name == self.zone);
        self.state = match std::mem::replace(&mut self.state, State::Start) {
            State::Start => {
                if soa.is_none() {
                    return Err(XfrError::NoLeadingSoa);
                }
                self.first = Some(r);
                State::AfterFirst
            }
            State::AfterFirst => match soa {
                // SOA, SOA: a zone holding nothing but its SOA.
                Some(s) if s == end => {
                    State::Done(XfrOutcome::Full(vec![self.first.clone().expect("first")]))
                }
                Some(s) => State::Deleting(ZoneDiff {
                    origin: self.zone.clone(),
                    old_serial: Some(s),
                    removed: vec![r],
                    ..ZoneDiff::default()
                }),
                None => State::Full(vec![self.first.clone().expect("first"), r]),
            },
            State::Full(mut records) => match soa {
                Some(_) => State::Done(XfrOutcome::Full(records)),
                None => {
                    records.push(r);
                    State::Full(records)
                }
            },
            State::Deleting(mut d) => match soa {
                Some(s) => {
                    d.new_serial = Some(s);
                    d.added.push(r);
                    State::Adding(d)
                }
                None => {
                    d.removed.push(r);
                    State::Deleting(d)
                }
            },
            State::Adding(mut d) => match soa {
                Some(s) => {
                    let last = d.new_serial == Some(end);
                    self.diffs.push(d);
                    if last {
                        State::Done(XfrOutcome::Incremental(std::mem::take(&mut self.diffs)))
                    } else {
                        State::Deleting(ZoneDiff {
                            origin: self.zone.clone(),
                            old_serial: Some(s),
                            removed: vec![r],
                            ..ZoneDiff::default()
                        })
                    }
                }
                None => {
                    d.added.push(r);
                    State::Adding(d)
                }
            },
            State::Done(_) => return Err(XfrError::AfterEnd),
        };
        Ok(())
    }

    /// Called after each message: the outcome once the transfer is over.
    pub fn finished(&mut self) -> Option<XfrOutcome> {
        if let State::AfterFirst = self.state {
            // A message ending right after the first SOA, when that serial
            // is not newer than ours: IXFR's "you are current".
            let end = self.final_serial();
            if self.ours.is_some_and(|ours| !is_newer(end, ours)) {
                return Some(XfrOutcome::UpToDate(end));
            }
        }
        match std::mem::replace(&mut self.state, State::Start) {
            State::Done(o) => Some(o),
            other => {
                self.state = other;
                None
            }
        }
    }
}
