//! skuad's integration tests, one test binary (`cargo test -p skuad --test e2e`; one suite:
//! `cargo test -p skuad --test e2e -- xdp::`). Each module was a test binary of its own; they
//! share the helpers in `common`.

mod common;

mod acme;
mod api;
mod cache;
mod daemon;
mod doh;
mod doq;
mod dot;
mod ha_lease;
mod hostile;
mod idle_flood;
mod real_world;
mod reload_load;
mod rrl;
mod sync;
mod xdp;
mod xfr;
mod xfr_interop;
mod xfr_secondary;
