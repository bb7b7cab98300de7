//! The ground floor: what every layer may use and that uses no other layer.
//!
//! The serving handle ([`serving`]) shared by the dataplanes and the control core, the
//! listener settings ([`settings`]), the interface the control core drives the dataplanes
//! through ([`planes`]), logging ([`log`]), the clock ([`clock`]), service-manager
//! notification ([`notify`]), query encoding and names as text ([`query`]), the resolver's
//! cache and job queue as the dataplanes see them ([`resolving`]), the service addresses'
//! leases ([`lease`]) and the zones that may be transferred ([`xfr`]).

pub mod clock;
pub mod lease;
pub mod log;
pub mod notify;
pub mod planes;
pub mod query;
pub mod resolving;
pub mod serving;
pub mod settings;
pub mod tls;
pub mod watched;
pub mod xfr;
