//! Zone transfers, the pure half: ACLs, TSIG, the IXFR history and the
//! AXFR/IXFR planner, reading a transfer's messages, and the state
//! machines of NOTIFY rounds and secondary refresh timers. The journal on
//! disk, the transfer client and the tokio tasks are in the `xdpdns` crate.

pub mod acl;
pub mod ixfr_history;
pub mod notify_round;
pub mod outbound;
pub mod secondary_timers;
pub mod tsig;
pub mod xfr_reader;

use std::collections::HashMap;

use hickory_proto::rr::LowerName;

pub use crate::zone::serial::SerialPolicy;
pub use acl::{Acl, AclRule};
pub use ixfr_history::{Ixfr, IxfrSource, JournalLimits, NoHistory};
pub use tsig::Keyring;

/// Who may transfer which zone and who may NOTIFY which secondary zone;
/// swapped whole on reload.
#[derive(Clone, Debug)]
pub struct TransferPolicy {
    pub keyring: Keyring,
    /// For zones without their own `allow_transfer`.
    pub default_acl: Acl,
    pub zone_acl: HashMap<LowerName, Acl>,
    /// Secondary zones, each with the ACL its NOTIFYs must pass.
    pub notify_acl: HashMap<LowerName, Acl>,
    /// Outgoing transfers at once (`[transfer] max_transfers_out`).
    pub max_transfers_out: usize,
    /// Who may change which zones by UPDATE (`[[update_grant]]`).
    pub update: crate::update::UpdatePolicy,
}

/// `[transfer] max_transfers_out` by default (BIND's default too).
pub const MAX_TRANSFERS_OUT: usize = 10;

impl Default for TransferPolicy {
    fn default() -> Self {
        TransferPolicy {
            keyring: Keyring::default(),
            default_acl: Acl::default(),
            zone_acl: HashMap::new(),
            notify_acl: HashMap::new(),
            max_transfers_out: MAX_TRANSFERS_OUT,
            update: crate::update::UpdatePolicy::default(),
        }
    }
}

impl TransferPolicy {
    /// The CNS default: transfers to loopback only, no keys.
    pub fn loopback_only() -> TransferPolicy {
        TransferPolicy {
            default_acl: Acl::loopback(),
            ..TransferPolicy::default()
        }
    }

    pub fn transfer_acl(&self, zone: &LowerName) -> &Acl {
        self.zone_acl.get(zone).unwrap_or(&self.default_acl)
    }
}
