//! What the kernel reads besides the table: the EDNS settings it answers
//! with (payload size, NSID, cookie secrets), its wall clock for cookies,
//! rate limiting, and the destination addresses it answers.

use std::net::IpAddr;

use xdpdns_common::rrl::Settings as RrlSettings;
use xdpdns_common::{edns_option, nsid_mode, AddressKey, XdpConfig, NSID_MAX};

use super::error::XdpError;
use super::program::FastPath;
use crate::answers::compile::ones_complement_sum;
use crate::wire::ServerEdns;

impl FastPath {
    /// The settings a program starts with (loaded or adopted): the EDNS
    /// settings and the wall clock, in one configuration write.
    pub(super) fn start_settings(&mut self, edns: &ServerEdns) -> Result<(), XdpError> {
        set_edns_fields(&mut self.current, edns);
        self.current.realtime_offset_ns = realtime_offset_ns();
        self.config.set(0, self.current, 0)?;
        Ok(())
    }

    /// Sets the kernel's rate limiting (`settings.rate` 0: off). Its
    /// buckets are the table the program was loaded with
    /// ([`Capacity::rrl_slots`]), whatever `settings.slots` says.
    pub fn set_rrl(&mut self, settings: RrlSettings) -> Result<(), XdpError> {
        self.current.rrl = RrlSettings {
            slots: self.rrl_slots,
            ..settings
        };
        self.config.set(0, self.current, 0)?;
        Ok(())
    }

    /// Sets the kernel's dnstap sampling: one outcome in N per kind.
    pub fn set_tap(
        &mut self,
        every: [u32; xdpdns_common::tap::kind::COUNT],
    ) -> Result<(), XdpError> {
        self.current.tap_every = every;
        self.config.set(0, self.current, 0)?;
        Ok(())
    }

    /// Takes the fallback's EDNS settings: payload size, NSID, cookie
    /// secrets (on reload).
    pub fn set_edns(&mut self, edns: &ServerEdns) -> Result<(), XdpError> {
        set_edns_fields(&mut self.current, edns);
        self.config.set(0, self.current, 0)?;
        Ok(())
    }

    /// Re-reads the wall clock the kernel mints cookie timestamps from
    /// (called every second: NTP slews the wall clock, not the monotonic
    /// one the kernel reads).
    pub fn refresh_clock(&mut self) -> Result<(), XdpError> {
        self.set_clock(realtime_offset_ns())
    }

    /// Sets the kernel's wall clock to CLOCK_MONOTONIC + `offset_ns`
    /// (tests pin the kernel's time this way).
    pub fn set_clock(&mut self, offset_ns: u64) -> Result<(), XdpError> {
        self.current.realtime_offset_ns = offset_ns;
        self.config.set(0, self.current, 0)?;
        Ok(())
    }

    /// Answers only queries sent to `addresses` (`None`: to any address
    /// of the attached interfaces).
    pub fn set_destinations(&mut self, addresses: Option<&[IpAddr]>) -> Result<(), XdpError> {
        let map = &mut self.addresses;
        let old: Vec<AddressKey> = map.keys().filter_map(Result::ok).collect();
        let new: Vec<AddressKey> = addresses
            .unwrap_or_default()
            .iter()
            .map(|a| match a {
                IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
                IpAddr::V6(v6) => v6.octets(),
            })
            .collect();
        for k in &new {
            map.insert(k, 1, 0)?;
        }
        // Filter on only once the addresses are in; off before removing.
        self.current.filter_destination = u32::from(addresses.is_some());
        self.config.set(0, self.current, 0)?;
        for k in old.iter().filter(|k| !new.contains(k)) {
            let _ = map.remove(k);
        }
        Ok(())
    }
}

/// Copies the fallback's EDNS settings into the kernel's configuration.
pub(super) fn set_edns_fields(cfg: &mut XdpConfig, edns: &ServerEdns) {
    cfg.udp_payload = edns.udp_payload;
    cfg.cookie_keys = edns.cookies.key_words();
    cfg.cookie_previous = u32::from(edns.cookies.previous.is_some());
    cfg.nsid = [0; NSID_MAX + 4];
    cfg.nsid_len = 0;
    cfg.nsid_sum = 0;
    cfg.nsid_mode = match &edns.nsid {
        None => nsid_mode::NONE,
        Some(id) if id.len() > NSID_MAX => nsid_mode::PASS,
        Some(id) => {
            let option = &mut cfg.nsid[..4 + id.len()];
            option[..2].copy_from_slice(&edns_option::NSID.to_be_bytes());
            option[2..4].copy_from_slice(&(id.len() as u16).to_be_bytes());
            option[4..].copy_from_slice(id);
            cfg.nsid_len = id.len() as u32;
            cfg.nsid_sum = ones_complement_sum(option);
            nsid_mode::INLINE
        }
    };
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC, in nanoseconds.
pub fn realtime_offset_ns() -> u64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid clock id and out-pointer.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    let mono = read(libc::CLOCK_MONOTONIC);
    let real = read(libc::CLOCK_REALTIME);
    real.wrapping_sub(mono)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_for(nsid: Option<&[u8]>) -> XdpConfig {
        let edns = ServerEdns {
            udp_payload: 1400,
            nsid: nsid.map(<[u8]>::to_vec),
            ..ServerEdns::default()
        };
        let mut cfg = XdpConfig::new(53, 1232);
        set_edns_fields(&mut cfg, &edns);
        cfg
    }

    #[test]
    fn nsid_is_inlined_as_an_option_with_its_checksum() {
        let cfg = config_for(Some(b"ns1"));
        assert_eq!(cfg.udp_payload, 1400);
        assert_eq!(cfg.nsid_mode, nsid_mode::INLINE);
        assert_eq!(cfg.nsid_len, 3);
        let option = [0, 3, 0, 3, b'n', b's', b'1'];
        assert_eq!(&cfg.nsid[..7], &option);
        assert_eq!(cfg.nsid_sum, ones_complement_sum(&option));
    }

    #[test]
    fn no_nsid_or_one_too_long_for_the_kernel() {
        let off = config_for(None);
        assert_eq!((off.nsid_mode, off.nsid_len), (nsid_mode::NONE, 0));
        let long = vec![b'x'; NSID_MAX + 1];
        let passed = config_for(Some(&long));
        assert_eq!(passed.nsid_mode, nsid_mode::PASS, "the fallback answers it");
        assert_eq!(passed.nsid_len, 0);
    }

    #[test]
    fn a_later_setting_clears_an_earlier_nsid() {
        let mut cfg = config_for(Some(b"a-long-server-id"));
        set_edns_fields(&mut cfg, &ServerEdns::default());
        assert_eq!(cfg.nsid_mode, nsid_mode::NONE);
        assert!(cfg.nsid.iter().all(|&b| b == 0));
    }

    #[test]
    fn the_realtime_offset_is_the_wall_clock_minus_the_monotonic_one() {
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let offset = realtime_offset_ns();
        assert!(offset < unix_ns, "the monotonic clock is past zero");
        assert!(offset > unix_ns / 2, "boot was not half the epoch ago");
    }
}
