//! The VRRPv3 router: one virtual router (one VRID, one address family) on one interface,
//! the state machine of RFC 9568 §6.
//!
//! Sans-IO: every method takes `now`, nanoseconds of the caller's monotonic clock; the
//! router answers with [`Output`]s the caller drains with [`Router::poll_output`] (packets
//! to send, state changes, the moment to announce the addresses), and tells the caller
//! when to call [`Router::handle_timeout`] next ([`Router::poll_timeout`]).
//!
//! Timers (RFC 9568 §6.1), from the current priority and Master_Adver_Interval (the
//! Active Router's interval, learnt from its advertisements):
//!
//! - `Skew_Time = ((256 − priority) × Master_Adver_Interval) / 256`. The RFC's unit is the
//!   centisecond; the division is done in nanoseconds, not truncated to whole centiseconds
//!   (priority 200 at 10 cs skews 21.875 ms, not 20 ms), as keepalived does (in µs): two
//!   close priorities keep different skews at short intervals.
//! - `Master_Down_Interval = 3 × Master_Adver_Interval + Skew_Time`.
//!
//! Additions to the RFC, all from keepalived:
//!
//! - [`State::Fault`]: the interface is down ([`Router::link_down`]). No advertisement is
//!   sent (none could leave), no timer runs, the addresses are released (the caller does it
//!   on the [`Output::Transition`]). [`Router::link_up`] starts the router again as at
//!   startup: Backup, or Master at once for an address owner.
//! - `preempt_delay_ms`: a Backup holds back from preempting a lower-priority Master until
//!   `preempt_delay_ms` after the first lower-priority advertisement it saw since it
//!   entered Backup (at startup, within one advertisement interval of startup) or since the
//!   last advertisement of a priority at least its own; meanwhile lower-priority
//!   advertisements reset the Master_Down_Timer as if accepted. This is keepalived's
//!   `preempt_delay` exactly (vrrp.c, `vrrp_state_backup`).
//! - [`Router::set_priority`]: the effective priority that health checks move (keepalived's
//!   `track_script` weights), with an immediate advertisement from a Master so that a
//!   Backup now of higher priority can preempt it.
//!
//! With unicast peers (keepalived's extension, outside the RFC) the TTL / hop limit must
//! still be 255, as RFC 9568 §7.1 requires of every advertisement: a peer's source address
//! is easily forged from off the link, a TTL of 255 is not (RFC 5082). Unicast peers across
//! routers, or keepalived's IPv6 unicast adverts (hop limit 64 unless its `unicast_ttl 255`
//! is set), need [`Router::set_strict_unicast_ttl`]`(false)`. An IPv6 primary address need
//! not be link-local in unicast mode: keepalived 2.2.7 sends IPv6 unicast adverts from
//! `unicast_src_ip`.
//!
//! Departures from keepalived, where RFC 9568 is followed instead: a Master discards a
//! lower-priority advertisement without answering it (keepalived answers, "forcing new
//! election"); an advertisement whose address list differs from ours is processed and
//! counted, not dropped (§7.1 says log it; keepalived drops it unless
//! `skip_check_adv_addr`); an address owner (priority 255) discards every advertisement
//! (§7.1).

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::net::IpAddr;

use crate::packet::{self, Advert, ChecksumMode, ParseError};

/// Nanoseconds in a centisecond.
const NS_PER_CS: u64 = 10_000_000;
/// Nanoseconds in a millisecond.
const NS_PER_MS: u64 = 1_000_000;
/// The priority of the router that owns the virtual addresses (RFC 9568 §5.2.4).
pub const PRIORITY_OWNER: u8 = 255;
/// The priority a Master advertises when it stops (RFC 9568 §5.2.4).
pub const PRIORITY_STOP: u8 = 0;

/// One virtual router's configuration (RFC 9568 §6.1 and keepalived's extensions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Virtual Router Identifier, 1..=255.
    pub vrid: u8,
    /// Base priority, 1..=255; 255 only on the router that owns the addresses (it starts as
    /// Master at once and never lowers its priority).
    pub priority: u8,
    /// Advertisement_Interval in centiseconds, 1..=4095.
    pub advert_interval_cs: u16,
    /// Preempt_Mode: whether a higher-priority Backup takes over from a lower-priority
    /// Master (keepalived: `nopreempt` when false).
    pub preempt: bool,
    /// keepalived's `preempt_delay`, in milliseconds (0: none); see the module docs.
    pub preempt_delay_ms: u32,
    /// Accept_Mode (RFC 9568 §6.1): whether a Master that is not the owner accepts packets
    /// addressed to the virtual addresses. Carried for the caller, which applies it.
    pub accept_mode: bool,
    /// This router's primary address on the interface: the source of its advertisements
    /// and the tie-breaker between equal priorities. For IPv6 with multicast, a link-local
    /// address (RFC 9568 §5.1.2.1); unicast peers may use any (keepalived's
    /// `unicast_src_ip`).
    pub primary: IpAddr,
    /// The virtual addresses, all of the primary's family, at most 255.
    pub addresses: Vec<IpAddr>,
    /// keepalived's `unicast_peer`: when not empty, advertisements go to each of these
    /// instead of the multicast group, and advertisements from any other source are dropped.
    pub unicast_peers: Vec<IpAddr>,
    /// The checksum form for IPv4 unicast (keepalived's `old_unicast_checksum`).
    pub checksum: ChecksumMode,
}

/// A configuration field out of range; [`fmt::Display`] names the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// `vrid` is 0.
    Vrid,
    /// `priority` is 0 (0 is reserved for a stopping Master).
    Priority,
    /// `advert_interval_cs` is not in 1..=4095.
    AdvertInterval(u16),
    /// `primary` is unspecified or multicast.
    Primary(IpAddr),
    /// `primary` is IPv6 but not link-local, and there are no unicast peers (RFC 9568
    /// §5.1.2.1).
    PrimaryNotLinkLocal(IpAddr),
    /// `addresses` is empty.
    NoAddresses,
    /// `addresses` has more than 255 entries (Count IPvX Addr is one byte).
    TooManyAddresses(usize),
    /// An entry of `addresses` is not of the primary's family.
    AddressFamily(IpAddr),
    /// An entry of `unicast_peers` is not of the primary's family, or is the primary.
    UnicastPeer(IpAddr),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Vrid => f.write_str("vrid: 0 is not a virtual router id (1..=255)"),
            Self::Priority => f.write_str("priority: 0 is reserved (1..=255)"),
            Self::AdvertInterval(i) => {
                write!(f, "advert_interval_cs: {i} is not in 1..=4095 centiseconds")
            }
            Self::Primary(a) => write!(f, "primary: {a} is unspecified or multicast"),
            Self::PrimaryNotLinkLocal(a) => {
                write!(f, "primary: {a} is IPv6 but not link-local (fe80::/10)")
            }
            Self::NoAddresses => f.write_str("addresses: empty"),
            Self::TooManyAddresses(n) => write!(f, "addresses: {n} of them, at most 255"),
            Self::AddressFamily(a) => {
                write!(f, "addresses: {a} is not of the primary address's family")
            }
            Self::UnicastPeer(a) => write!(
                f,
                "unicast_peers: {a} is the primary address or not of its family"
            ),
        }
    }
}

impl core::error::Error for ConfigError {}

impl Config {
    /// Checks every field's range and the families (see [`ConfigError`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.vrid == 0 {
            return Err(ConfigError::Vrid);
        }
        if self.priority == 0 {
            return Err(ConfigError::Priority);
        }
        if !(1..=packet::MAX_INTERVAL_CS).contains(&self.advert_interval_cs) {
            return Err(ConfigError::AdvertInterval(self.advert_interval_cs));
        }
        if self.primary.is_unspecified() || self.primary.is_multicast() {
            return Err(ConfigError::Primary(self.primary));
        }
        if let IpAddr::V6(p) = self.primary
            && !p.is_unicast_link_local()
            && self.unicast_peers.is_empty()
        {
            return Err(ConfigError::PrimaryNotLinkLocal(self.primary));
        }
        if self.addresses.is_empty() {
            return Err(ConfigError::NoAddresses);
        }
        if self.addresses.len() > 255 {
            return Err(ConfigError::TooManyAddresses(self.addresses.len()));
        }
        let v4 = self.primary.is_ipv4();
        if let Some(a) = self.addresses.iter().find(|a| a.is_ipv4() != v4) {
            return Err(ConfigError::AddressFamily(*a));
        }
        if let Some(a) = self
            .unicast_peers
            .iter()
            .find(|a| a.is_ipv4() != v4 || **a == self.primary)
        {
            return Err(ConfigError::UnicastPeer(*a));
        }
        Ok(())
    }
}

/// The router's state (RFC 9568 §6.4, plus `Fault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Not started, or shut down (§6.4.1).
    Initialize,
    /// Watching the Master, ready to take over (§6.4.2).
    Backup,
    /// Holding the addresses and advertising (§6.4.3; the RFC's Active Router).
    Master,
    /// Not in the RFC: the link is down (keepalived's FAULT). Nothing is sent, the
    /// addresses are released; the link coming back up starts the router again.
    Fault,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Initialize => "Initialize",
            Self::Backup => "Backup",
            Self::Master => "Master",
            Self::Fault => "Fault",
        })
    }
}

/// Why a transition happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// [`Router::startup`] of a router that does not own the addresses: to Backup.
    Startup,
    /// [`Router::startup`] of the address owner (priority 255): to Master at once.
    Owner,
    /// The Master_Down_Timer fired: the Master fell silent, or it has a lower priority and
    /// we preempt it (its advertisements were discarded).
    MasterDown,
    /// The Master_Down_Timer, set to Skew_Time by a Master's priority-0 advertisement, fired.
    PriorityZero,
    /// A Master received a higher-priority advertisement (or an equal one from a greater
    /// primary address): to Backup.
    Preempted,
    /// [`Router::shutdown`].
    Shutdown,
    /// [`Router::link_down`].
    LinkDown,
    /// [`Router::link_up`].
    LinkUp,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Startup => "startup",
            Self::Owner => "address owner",
            Self::MasterDown => "master down",
            Self::PriorityZero => "master stopped (priority 0)",
            Self::Preempted => "preempted",
            Self::Shutdown => "shutdown",
            Self::LinkDown => "link down",
            Self::LinkUp => "link up",
        })
    }
}

/// What the caller has to do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send this VRRP payload from the primary address to `dst` (the multicast group, or
    /// one unicast peer: one `Send` per destination), protocol 112, TTL / hop limit 255.
    Send {
        /// The IP destination.
        dst: IpAddr,
        /// The VRRP payload, checksum included.
        bytes: Vec<u8>,
    },
    /// The state changed: on entering Master add the addresses, on leaving it remove them.
    Transition {
        /// The state left.
        from: State,
        /// The state entered.
        to: State,
        /// Why.
        reason: Reason,
    },
    /// Announce every virtual address (gratuitous ARP for IPv4, unsolicited Neighbor
    /// Advertisement for IPv6, RFC 9568 §6.4.1-§6.4.2; frames from [`crate::announce`]).
    /// Emitted on becoming Master, after its first advertisement.
    Announce,
}

/// Why a received packet was dropped before the state machine saw it (RFC 9568 §7.1),
/// for the caller's counters and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Drop {
    /// TTL / hop limit not 255: the packet came from off the link (always checked but in
    /// unicast mode after [`Router::set_strict_unicast_ttl`]`(false)`).
    BadTtl,
    /// Not a valid advertisement (length, version, type, interval, checksum).
    Parse(ParseError),
    /// A valid advertisement for another virtual router.
    OtherVrid,
    /// The IP source or destination is not of this router's family.
    WrongFamily,
    /// Unicast mode: the source is not one of the configured peers.
    NotAPeer,
    /// Our own advertisement (source = our primary address), looped back.
    OwnAdvert,
    /// We own the addresses (priority 255): §7.1 discards every advertisement.
    Owner,
    /// Valid, but the router is in Initialize or Fault and runs no state machine.
    Inactive,
}

impl fmt::Display for Drop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadTtl => f.write_str("TTL / hop limit not 255"),
            Self::Parse(e) => write!(f, "malformed advertisement: {e}"),
            Self::OtherVrid => f.write_str("another virtual router id"),
            Self::WrongFamily => f.write_str("wrong address family"),
            Self::NotAPeer => f.write_str("source is not a unicast peer"),
            Self::OwnAdvert => f.write_str("our own advertisement"),
            Self::Owner => f.write_str("we own the addresses (priority 255)"),
            Self::Inactive => f.write_str("router not running (initialize or fault)"),
        }
    }
}

/// Received packets dropped, by [`Drop`] kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropStats {
    /// [`Drop::BadTtl`].
    pub bad_ttl: u64,
    /// [`Drop::Parse`] with [`ParseError::Checksum`].
    pub checksum: u64,
    /// [`Drop::Parse`], every other error.
    pub parse: u64,
    /// [`Drop::OtherVrid`].
    pub other_vrid: u64,
    /// [`Drop::WrongFamily`].
    pub wrong_family: u64,
    /// [`Drop::NotAPeer`].
    pub not_a_peer: u64,
    /// [`Drop::OwnAdvert`].
    pub own_advert: u64,
    /// [`Drop::Owner`].
    pub owner: u64,
    /// [`Drop::Inactive`].
    pub inactive: u64,
}

impl DropStats {
    /// Every drop.
    pub fn total(&self) -> u64 {
        self.bad_ttl
            + self.checksum
            + self.parse
            + self.other_vrid
            + self.wrong_family
            + self.not_a_peer
            + self.own_advert
            + self.owner
            + self.inactive
    }

    fn count(&mut self, d: &Drop) {
        let c = match d {
            Drop::BadTtl => &mut self.bad_ttl,
            Drop::Parse(ParseError::Checksum) => &mut self.checksum,
            Drop::Parse(_) => &mut self.parse,
            Drop::OtherVrid => &mut self.other_vrid,
            Drop::WrongFamily => &mut self.wrong_family,
            Drop::NotAPeer => &mut self.not_a_peer,
            Drop::OwnAdvert => &mut self.own_advert,
            Drop::Owner => &mut self.owner,
            Drop::Inactive => &mut self.inactive,
        };
        *c += 1;
    }
}

/// Counters (in the spirit of the VRRPv3 MIB, RFC 6527).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Advertisement packets sent (one per destination), priority 0 included.
    pub adverts_sent: u64,
    /// Packets handed to [`Router::handle_advert`].
    pub adverts_received: u64,
    /// Of those, dropped by the receive checks.
    pub dropped: DropStats,
    /// Valid advertisements the state machine discarded (§6.4.2: lower priority while
    /// preempting; §6.4.3: lower priority at a Master).
    pub discarded: u64,
    /// State changes.
    pub transitions: u64,
    /// Times this router became Master.
    pub became_master: u64,
    /// Priority-0 advertisement packets sent (shutdown of a Master).
    pub priority_zero_sent: u64,
    /// Valid priority-0 advertisements received from another router for our VRID.
    pub priority_zero_received: u64,
    /// Valid advertisements for our VRID whose address list differs from ours (§7.1:
    /// logged, still processed).
    pub address_mismatches: u64,
}

/// The last other router heard advertising for this VRID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ForeignMaster {
    /// Its primary address (the advertisement's IP source).
    pub addr: IpAddr,
    /// The priority in its last advertisement.
    pub priority: u8,
    /// `now` when its last advertisement arrived.
    pub last_advert_ns: u64,
    /// Its last advertisement had priority 0: it has stopped serving the addresses.
    pub released: bool,
}

/// One VRRPv3 virtual router. See the module docs.
#[derive(Clone, Debug)]
pub struct Router {
    cfg: Config,
    state: State,
    /// Effective priority (the base moved by health checks; 255 for an owner).
    priority: u8,
    /// Master_Adver_Interval, centiseconds.
    master_adver_int_cs: u16,
    /// Master_Down_Timer's deadline (Backup).
    master_down_at: Option<u64>,
    /// Whether the Master_Down_Timer running was set by a priority-0 advertisement.
    down_by_zero: bool,
    /// Adver_Timer's deadline (Master).
    adver_at: Option<u64>,
    /// End of the preempt delay, once started (keepalived's `preempt_time`).
    preempt_hold_until: Option<u64>,
    link_up: bool,
    strict_unicast_ttl: bool,
    out: VecDeque<Output>,
    stats: Stats,
    foreign: Option<ForeignMaster>,
}

/// Whether `a` is greater than `b` as an unsigned integer in network byte order
/// (RFC 9568 §6.4.3: the tie-break between equal priorities).
fn addr_greater(a: IpAddr, b: IpAddr) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => u32::from(a) > u32::from(b),
        (IpAddr::V6(a), IpAddr::V6(b)) => u128::from(a) > u128::from(b),
        _ => false,
    }
}

impl Router {
    /// A router in [`State::Initialize`], link up, for a valid configuration.
    pub fn new(cfg: Config) -> Result<Router, ConfigError> {
        cfg.validate()?;
        Ok(Router {
            priority: cfg.priority,
            master_adver_int_cs: cfg.advert_interval_cs,
            cfg,
            state: State::Initialize,
            master_down_at: None,
            down_by_zero: false,
            adver_at: None,
            preempt_hold_until: None,
            link_up: true,
            strict_unicast_ttl: true,
            out: VecDeque::new(),
            stats: Stats::default(),
            foreign: None,
        })
    }

    /// Unicast mode only: whether TTL / hop limit 255 is required, as in multicast mode.
    /// On by default (RFC 9568 §7.1: "MUST verify that the IPvX TTL/Hop Limit is 255"):
    /// without it an off-link sender forging a peer's address with a higher priority
    /// pushes this router to Backup. Turn it off only for peers that are routed (their
    /// adverts arrive with less) or send less: keepalived checks no TTL from unicast peers
    /// by default and sends IPv6 unicast adverts with the kernel's default hop limit (64
    /// in `tests/capture-keepalived.sh`'s capture) unless its `unicast_ttl 255` is set.
    /// Multicast mode always requires 255.
    pub fn set_strict_unicast_ttl(&mut self, strict: bool) {
        self.strict_unicast_ttl = strict;
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The effective priority (what the advertisements carry).
    pub fn priority(&self) -> u8 {
        self.priority
    }

    /// Whether this router owns the addresses (configured priority 255).
    pub fn is_owner(&self) -> bool {
        self.cfg.priority == PRIORITY_OWNER
    }

    /// Master_Adver_Interval in centiseconds: the Master's interval as learnt from its
    /// advertisements; our own while we are Master or before any was heard.
    pub fn master_adver_interval_cs(&self) -> u16 {
        self.master_adver_int_cs
    }

    /// Skew_Time in nanoseconds: `((256 − priority) × Master_Adver_Interval) / 256`.
    pub fn skew_ns(&self) -> u64 {
        (256 - u64::from(self.priority)) * u64::from(self.master_adver_int_cs) * NS_PER_CS / 256
    }

    /// Master_Down_Interval in nanoseconds: `3 × Master_Adver_Interval + Skew_Time`.
    pub fn master_down_interval_ns(&self) -> u64 {
        3 * u64::from(self.master_adver_int_cs) * NS_PER_CS + self.skew_ns()
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Valid advertisements for our VRID whose address list differs from ours.
    pub fn address_mismatches(&self) -> u64 {
        self.stats.address_mismatches
    }

    /// The last other router that sent a valid advertisement for our VRID, whether it was
    /// accepted or discarded.
    pub fn foreign_master(&self) -> Option<ForeignMaster> {
        self.foreign
    }

    /// The next output to act on, in order.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The earliest deadline at which [`Router::handle_timeout`] has something to do:
    /// the Master_Down_Timer in Backup, the Adver_Timer in Master, none otherwise.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            State::Backup => self.master_down_at,
            State::Master => self.adver_at,
            State::Initialize | State::Fault => None,
        }
    }

    /// Startup event (RFC 9568 §6.4.1): the owner becomes Master at once, any other router
    /// Backup with the Master_Down_Timer running. With the link down: Fault. Does nothing
    /// unless in Initialize.
    pub fn startup(&mut self, now: u64) {
        if self.state != State::Initialize {
            return;
        }
        if self.link_up {
            self.start(now, Reason::Startup);
        } else {
            self.transition(State::Fault, Reason::LinkDown);
        }
    }

    /// Shutdown event: a Master sends one advertisement with priority 0 (so a Backup
    /// takes over after only its Skew_Time) and goes to Initialize (§6.4.3); Backup and
    /// Fault go to Initialize (§6.4.2).
    pub fn shutdown(&mut self, _now: u64) {
        match self.state {
            State::Initialize => return,
            State::Master => self.send_advert(PRIORITY_STOP),
            State::Backup | State::Fault => {}
        }
        self.stop_timers();
        self.transition(State::Initialize, Reason::Shutdown);
    }

    /// The interface went down: Backup and Master go to Fault (nothing can be sent).
    /// Before startup it only records that the link is down.
    pub fn link_down(&mut self, _now: u64) {
        self.link_up = false;
        if matches!(self.state, State::Backup | State::Master) {
            self.stop_timers();
            self.transition(State::Fault, Reason::LinkDown);
        }
    }

    /// The interface came back up: Fault starts again as at startup (Backup, or Master at
    /// once for the owner).
    pub fn link_up(&mut self, now: u64) {
        self.link_up = true;
        if self.state == State::Fault {
            self.start(now, Reason::LinkUp);
        }
    }

    /// Sets the effective priority (health-check weights). The caller computes base ±
    /// weights; it is clamped to 1..=254. The owner's priority stays 255. A Master whose
    /// priority changes advertises at once (and restarts its Adver_Timer), so that a
    /// Backup now above it preempts without waiting for the next interval. Skew_Time and
    /// Master_Down_Interval follow from the next timer set.
    pub fn set_priority(&mut self, now: u64, p: u8) {
        if self.is_owner() {
            return;
        }
        let p = p.clamp(1, PRIORITY_OWNER - 1);
        if p == self.priority {
            return;
        }
        self.priority = p;
        if self.state == State::Master {
            self.send_advert(p);
            self.adver_at = Some(now.saturating_add(self.adver_interval_ns()));
        }
    }

    /// Timer expiry: call at or after [`Router::poll_timeout`] (earlier calls do nothing).
    /// Backup: the Master_Down_Timer makes us Master (§6.4.2). Master: the Adver_Timer
    /// sends an advertisement (§6.4.3).
    pub fn handle_timeout(&mut self, now: u64) {
        match self.state {
            State::Backup => {
                if self.master_down_at.is_some_and(|t| now >= t) {
                    let reason = if self.down_by_zero {
                        Reason::PriorityZero
                    } else {
                        Reason::MasterDown
                    };
                    self.become_master(now, reason);
                }
            }
            State::Master => {
                if self.adver_at.is_some_and(|t| now >= t) {
                    self.send_advert(self.priority);
                    self.adver_at = Some(now.saturating_add(self.adver_interval_ns()));
                }
            }
            State::Initialize | State::Fault => {}
        }
    }

    /// A VRRP packet received from `src` to `dst` with IP TTL / hop limit `ttl`; `bytes`
    /// is the IP payload. Runs the receive checks of RFC 9568 §7.1 (TTL, family, the
    /// packet itself, VRID, our own, unicast peers, owner) and then the state machine
    /// (§6.4.2, §6.4.3). `Ok` means the state machine saw it, even if it discarded it
    /// (see [`Stats::discarded`]).
    pub fn handle_advert(
        &mut self,
        now: u64,
        src: IpAddr,
        dst: IpAddr,
        ttl: u8,
        bytes: &[u8],
    ) -> Result<(), Drop> {
        self.stats.adverts_received += 1;
        let r = self.receive(now, src, dst, ttl, bytes);
        if let Err(d) = &r {
            self.stats.dropped.count(d);
        }
        r
    }

    fn receive(
        &mut self,
        now: u64,
        src: IpAddr,
        dst: IpAddr,
        ttl: u8,
        bytes: &[u8],
    ) -> Result<(), Drop> {
        // §7.1: "MUST verify that the IPvX TTL/Hop Limit is 255". Unicast peers
        // (keepalived's extension) too, unless relaxed for routed peers (see
        // set_strict_unicast_ttl).
        let unicast = !self.cfg.unicast_peers.is_empty();
        if ttl != packet::TTL && (!unicast || self.strict_unicast_ttl) {
            return Err(Drop::BadTtl);
        }
        let v4 = self.cfg.primary.is_ipv4();
        if src.is_ipv4() != v4 || dst.is_ipv4() != v4 {
            return Err(Drop::WrongFamily);
        }
        // §7.1: version, complete packet, checksum.
        let adv = packet::parse(bytes, src, dst, self.cfg.checksum).map_err(Drop::Parse)?;
        // §7.1: "MUST verify that the VRID is configured on the receiving interface".
        if adv.vrid != self.cfg.vrid {
            return Err(Drop::OtherVrid);
        }
        if src == self.cfg.primary {
            return Err(Drop::OwnAdvert);
        }
        if !self.cfg.unicast_peers.is_empty() && !self.cfg.unicast_peers.contains(&src) {
            return Err(Drop::NotAPeer);
        }
        self.foreign = Some(ForeignMaster {
            addr: src,
            priority: adv.priority,
            last_advert_ns: now,
            released: adv.priority == PRIORITY_STOP,
        });
        if adv.priority == PRIORITY_STOP {
            self.stats.priority_zero_received += 1;
        }
        // §7.1: "MAY verify that 'Count IPvX Addrs' and the list of IPvX Address(es) match
        // ... SHOULD log the event": counted, processed all the same.
        if !self.same_addresses(&adv) {
            self.stats.address_mismatches += 1;
        }
        // §7.1: "... and the local router is not the IPvX address owner (Priority = 255)".
        if self.is_owner() {
            return Err(Drop::Owner);
        }
        match self.state {
            State::Backup => self.backup_receive(now, &adv),
            State::Master => self.master_receive(now, src, &adv),
            State::Initialize | State::Fault => return Err(Drop::Inactive),
        }
        Ok(())
    }

    fn same_addresses(&self, adv: &Advert) -> bool {
        let ours = &self.cfg.addresses;
        adv.addrs.iter().all(|a| ours.contains(a)) && ours.iter().all(|a| adv.addrs.contains(a))
    }

    /// RFC 9568 §6.4.2, "If an ADVERTISEMENT is received".
    fn backup_receive(&mut self, now: u64, adv: &Advert) {
        if adv.priority == PRIORITY_STOP {
            // The Master is leaving: take over after our Skew_Time only, so that the
            // highest-priority Backup goes first.
            self.master_down_at = Some(now.saturating_add(self.skew_ns()));
            self.down_by_zero = true;
            return;
        }
        let lower = adv.priority < self.priority;
        let accept = if !self.cfg.preempt || !lower {
            if !lower {
                // keepalived: an advertisement at or above our priority stops the delay.
                self.preempt_hold_until = None;
            }
            true
        } else if self.cfg.preempt_delay_ms > 0 {
            // keepalived's preempt_delay: accept lower-priority advertisements until the
            // delay, started by the first of them, has run out.
            let until = *self.preempt_hold_until.get_or_insert(
                now.saturating_add(u64::from(self.cfg.preempt_delay_ms) * NS_PER_MS),
            );
            now < until
        } else {
            false
        };
        if accept {
            self.master_adver_int_cs = adv.max_advert_int_cs;
            self.master_down_at = Some(now.saturating_add(self.master_down_interval_ns()));
            self.down_by_zero = false;
        } else {
            // Preempt_Mode and a lower priority: discard, the Master_Down_Timer runs on and
            // we take over when it fires.
            self.stats.discarded += 1;
        }
    }

    /// RFC 9568 §6.4.3, "If an ADVERTISEMENT is received".
    fn master_receive(&mut self, now: u64, src: IpAddr, adv: &Advert) {
        if adv.priority == PRIORITY_STOP {
            // Another router thought it was Master and stopped: assert ourselves at once.
            self.send_advert(self.priority);
            self.adver_at = Some(now.saturating_add(self.adver_interval_ns()));
        } else if adv.priority > self.priority
            || (adv.priority == self.priority && addr_greater(src, self.cfg.primary))
        {
            self.adver_at = None;
            self.master_adver_int_cs = adv.max_advert_int_cs;
            self.master_down_at = Some(now.saturating_add(self.master_down_interval_ns()));
            self.down_by_zero = false;
            self.preempt_hold_until = None;
            self.transition(State::Backup, Reason::Preempted);
        } else {
            self.stats.discarded += 1;
        }
    }

    /// Initialize or Fault → Master (owner) or Backup.
    fn start(&mut self, now: u64, reason: Reason) {
        self.preempt_hold_until = None;
        if self.is_owner() {
            let reason = if reason == Reason::Startup {
                Reason::Owner
            } else {
                reason
            };
            self.become_master(now, reason);
        } else {
            self.master_adver_int_cs = self.cfg.advert_interval_cs;
            self.master_down_at = Some(now.saturating_add(self.master_down_interval_ns()));
            self.down_by_zero = false;
            self.transition(State::Backup, reason);
        }
    }

    /// §6.4.1 / §6.4.2: send an advertisement, announce the addresses, set the Adver_Timer,
    /// enter Master.
    fn become_master(&mut self, now: u64, reason: Reason) {
        self.master_down_at = None;
        self.down_by_zero = false;
        self.master_adver_int_cs = self.cfg.advert_interval_cs;
        self.send_advert(self.priority);
        self.out.push_back(Output::Announce);
        self.adver_at = Some(now.saturating_add(self.adver_interval_ns()));
        self.stats.became_master += 1;
        self.transition(State::Master, reason);
    }

    fn stop_timers(&mut self) {
        self.master_down_at = None;
        self.adver_at = None;
        self.down_by_zero = false;
    }

    fn transition(&mut self, to: State, reason: Reason) {
        let from = self.state;
        self.state = to;
        self.stats.transitions += 1;
        self.out.push_back(Output::Transition { from, to, reason });
    }

    fn adver_interval_ns(&self) -> u64 {
        u64::from(self.cfg.advert_interval_cs) * NS_PER_CS
    }

    /// One advertisement packet per destination: each unicast peer, or the group.
    fn send_advert(&mut self, priority: u8) {
        let adv = Advert {
            vrid: self.cfg.vrid,
            priority,
            max_advert_int_cs: self.cfg.advert_interval_cs,
            addrs: self.cfg.addresses.clone(),
        };
        let group = match self.cfg.primary {
            IpAddr::V4(_) => IpAddr::V4(packet::MCAST_V4),
            IpAddr::V6(_) => IpAddr::V6(packet::MCAST_V6),
        };
        let peers = &self.cfg.unicast_peers;
        let dsts = if peers.is_empty() {
            core::slice::from_ref(&group)
        } else {
            &peers[..]
        };
        for &dst in dsts {
            let bytes = adv.encode(self.cfg.primary, dst, self.cfg.checksum);
            self.out.push_back(Output::Send { dst, bytes });
            self.stats.adverts_sent += 1;
            if priority == PRIORITY_STOP {
                self.stats.priority_zero_sent += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests;
