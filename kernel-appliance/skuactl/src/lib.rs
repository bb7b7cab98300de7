//! `skuactl`: Skua's operator CLI, the parts that run on the appliance.
//!
//! What it does: A/B image upgrades (`upgrade`: a bundle into the inactive root slot with
//! systemd-boot boot counting, see [`upgrade`]), the boot health gate (`health`: a DNS query
//! skuad must answer before systemd-bless-boot marks a trial boot good, see [`health`]), and
//! the slot status (`slots`). The binary also drives skuad's REST API (`status`, `stats`,
//! `reload`, `zone`, `record`, `audit tail`, `cache`, `upstreams`) and verifies audit logs
//! offline (`audit verify`).
//! What it does not do (yet): fetch bundles over the network (hand it a file, a block device or standard input), or
//! verify bundle signatures (the verity root hash inside the UKI is what the kernel checks;
//! signed verity and Secure Boot are documented in docs/image.md as the next step).
//!
//! Everything that touches the disk works on any file, so the tests run it on disk images.

pub mod bundle;
pub mod health;
pub mod slots;
pub mod system;
pub mod upgrade;
