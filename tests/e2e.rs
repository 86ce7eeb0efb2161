//! End-to-end tests: one binary, one module per area, one support module
//! (`support`: starting the real binary, DNS clients, packet frames, peer
//! servers). Most start `xdpdns` on loopback; the XDP ones need root.

mod support;

mod anycast;
mod architecture;
mod catalog_following;
mod catalog_zones;
mod config_and_reload;
mod dnssec;
mod dnstap;
mod dynamic_updates;
mod fallback_server;
mod fuzz;
mod hostile_input;
mod key_rollovers;
mod malformed_input;
mod online_signing;
mod operations;
mod registry_api;
mod registry_etcd;
mod registry_zookeeper;
mod rrl;
mod status_page;
mod transfer_interop;
mod xdp_differential;
mod xdp_front_line;
mod xdp_veth;
mod zone_images;
