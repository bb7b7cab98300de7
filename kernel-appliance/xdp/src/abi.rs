//! The ABI between the XDP program and skuad: a `#[repr(C)]` mirror of `bpf/skua_xdp_abi.h`.
//!
//! Change both files together; the `const` asserts at the bottom catch layout drift on the
//! Rust side, and `tests/bpf_prog.rs` checks map names and behaviour against the committed
//! object. Everything here is `core` only (aya-log-common pattern), apart from the
//! [`aya::Pod`] impl, which only marks the config as plain bytes for aya's map API.

use core::mem::{offset_of, size_of};

/// XSKMAP: key = rx queue index (`u32`), value = AF_XDP socket fd (`SKUA_MAP_XSKS`).
pub const MAP_XSKS: &str = "skua_xsks";
/// ARRAY with one entry: [`XdpConfig`] (`SKUA_MAP_CFG`).
pub const MAP_CFG: &str = "skua_cfg";
/// HASH: key = IPv4 destination in network byte order (`u32`), value = [`Dest`] (`SKUA_MAP_DST4`).
pub const MAP_DST4: &str = "skua_dst4";
/// HASH: key = IPv6 destination (16 bytes), value = [`Dest`] (`SKUA_MAP_DST6`).
pub const MAP_DST6: &str = "skua_dst6";
/// PERCPU_ARRAY: key = [`Stat`], value = `u64` (`SKUA_MAP_STATS`).
pub const MAP_STATS: &str = "skua_stats";
/// HASH: key = [`AnswerKey`], value = [`AnswerValue`] (`SKUA_MAP_ANSWERS`).
pub const MAP_ANSWERS: &str = "skua_answers";
/// LPM_TRIE: key = [`AclKey`], value = `u8` of `ACL_*` bits: which answers the client may
/// get in the program (`SKUA_MAP_ACL`).
pub const MAP_ACL: &str = "skua_acl";
/// PERCPU_ARRAY with one entry: the program's work area (`SKUA_MAP_SCRATCH`).
pub const MAP_SCRATCH: &str = "skua_scratch";
/// HASH: key = [`AnswerKey`], value = [`CacheRef`]: the slot of a cached answer
/// (`SKUA_MAP_CACHE_INDEX`).
pub const MAP_CACHE_INDEX: &str = "skua_cache_index";
/// ARRAY: key = slot (`u32`), value = [`CachedValue`] (`SKUA_MAP_CACHE_SLOTS`).
pub const MAP_CACHE_SLOTS: &str = "skua_cache_slots";

/// `SKUA_ACL_LOCAL`: the client gets local answers in the program.
pub const ACL_LOCAL: u8 = 0x01;
/// `SKUA_ACL_CACHED_RD`: the client gets cached answers to queries with RD.
pub const ACL_CACHED_RD: u8 = 0x02;
/// `SKUA_ACL_CACHED`: the client gets cached answers to queries without RD.
pub const ACL_CACHED: u8 = 0x04;

/// Entries in the XSKMAP: the highest rx queue index served is `MAX_QUEUES - 1`.
pub const MAX_QUEUES: u32 = 256;
/// Entries in each destination map.
pub const MAX_DESTS: u32 = 1024;
/// Entries in the ACL trie (`SKUA_XDP_MAX_ACL`).
pub const MAX_ACL: u32 = 4096;
/// Default entries in the answer map (`SKUA_XDP_MAX_ANSWERS`); the loader may change it.
pub const MAX_ANSWERS: u32 = 65536;
/// Longest wire name in an [`AnswerKey`], root label included (`SKUA_ANSWER_NAME_MAX`).
pub const ANSWER_NAME_MAX: usize = 64;
/// Longest record section in an [`AnswerValue`] (`SKUA_ANSWER_TAIL_MAX`).
pub const ANSWER_TAIL_MAX: usize = 496;
/// Longest query and reply handled in the program (`SKUA_ANSWER_MSG_MAX`).
pub const ANSWER_MSG_MAX: usize = 512;
/// Default entries of [`MAP_CACHE_INDEX`] (`SKUA_XDP_MAX_CACHED`); the loader may change it.
pub const MAX_CACHED: u32 = 16384;
/// Slots of [`MAP_CACHE_SLOTS`] for `entries` cached answers: a quarter more, so that a
/// replaced answer's slot can rest before it is rewritten (`SKUA_XDP_CACHE_SLOTS`).
pub const fn cache_slots(entries: u32) -> u32 {
    entries + entries / 4
}
/// TTL patches per cached answer, at most (`SKUA_CACHED_TTLS`).
pub const CACHED_TTLS: usize = 16;
/// `ttl_off` of an unused patch (`SKUA_CACHED_NO_TTL`): past any reply in the work buffer.
pub const CACHED_NO_TTL: u16 = 800;

/// `SKUA_F_ENABLED`: redirect at all (clear = `XDP_PASS` everything).
pub const F_ENABLED: u16 = 0x0001;
// 0x0002 and 0x0004 were `F_ANY_V4` / `F_ANY_V6` ("every destination is ours"): they made
// the program answer broadcast, multicast and other hosts' addresses for wildcard listeners.
// The destination maps now always hold the interface's unicast addresses (see `ifaddr`).
/// `SKUA_F_ANSWER`: answer from [`MAP_ANSWERS`] with `XDP_TX` (clients allowed by [`MAP_ACL`]).
pub const F_ANSWER: u16 = 0x0008;
/// `SKUA_F_TX_REDIRECT`: send those answers with `bpf_redirect` to the ingress device
/// instead of `XDP_TX` (for veth: its `XDP_TX` does not wake a peer without XDP).
pub const F_TX_REDIRECT: u16 = 0x0010;
/// `SKUA_F_CACHE`: answer from the resolver's cached answers ([`MAP_CACHE_INDEX`]) too.
pub const F_CACHE: u16 = 0x0020;

/// `struct skua_xdp_config`: the single value of [`MAP_CFG`].
///
/// All zero (how the kernel creates the map) means disabled.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
#[repr(C)]
pub struct XdpConfig {
    /// Served UDP destination port, host byte order (53).
    pub port: u16,
    /// `F_*` bits.
    pub flags: u16,
    /// Zero.
    pub pad: u32,
    /// `CLOCK_MONOTONIC` in nanoseconds at skuad's second 0: the program's clock for the
    /// TTLs of cached answers.
    pub clock_origin_ns: u64,
}

impl XdpConfig {
    /// Enabled, serving `port`, for the destinations in the maps only.
    pub const fn enabled(port: u16) -> Self {
        Self {
            port,
            flags: F_ENABLED,
            pad: 0,
            clock_origin_ns: 0,
        }
    }

    /// Everything passes to the kernel.
    pub const fn disabled() -> Self {
        Self {
            port: 0,
            flags: 0,
            pad: 0,
            clock_origin_ns: 0,
        }
    }

    /// The same config with `flags` added.
    #[must_use]
    pub const fn with_flags(self, flags: u16) -> Self {
        Self {
            flags: self.flags | flags,
            ..self
        }
    }
}

// SAFETY: `XdpConfig` is `#[repr(C)]`, made only of integers, with no padding (size 16 =
// 2 + 2 + 4 + 8, asserted below), so every bit pattern is a valid value and it may be copied to
// and from the kernel as bytes, which is all `aya::Pod` requires.
unsafe impl aya::Pod for XdpConfig {}

/// `struct skua_dest`: a destination map value. `lease_until_ns` 0: always ours; else a
/// service address answered only while `bpf_ktime_get_ns()` is below it (the host agent's
/// lease, docs/ha.md).
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
#[repr(C)]
pub struct Dest {
    /// Expiry on the kernel's monotonic clock, or 0.
    pub lease_until_ns: u64,
}

// SAFETY: `Dest` is `#[repr(C)]`, one `u64`, no padding (size asserted below): every bit
// pattern is a valid value and it may be copied to and from the kernel as bytes.
unsafe impl aya::Pod for Dest {}

/// `struct skua_answer_key`: the query name lower-cased (wire form, zero padded) and type.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash)]
#[repr(C)]
pub struct AnswerKey {
    /// QTYPE, host byte order.
    pub qtype: u16,
    /// Wire length of the name, root label included.
    pub name_len: u8,
    /// Zero.
    pub pad: u8,
    /// Lower-cased wire name, zero padded.
    pub name: [u8; ANSWER_NAME_MAX],
}

/// `struct skua_answer`: a reply without its question (see `bpf/skua_xdp_abi.h`).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
#[repr(C)]
pub struct AnswerValue {
    /// Reply flags before RD/CD are copied from the query (QR, AA, RA, RCODE).
    pub flags: u16,
    /// ANCOUNT.
    pub ancount: u16,
    /// NSCOUNT.
    pub nscount: u16,
    /// ARCOUNT, not counting the OPT record.
    pub arcount: u16,
    /// Bytes of `tail` used.
    pub tail_len: u16,
    /// UDP payload size advertised in the reply's OPT record.
    pub edns_size: u16,
    /// RFC 1071 sum of `tail[..tail_len]` folded to 16 bits, in memory order, as if the
    /// tail started at an even offset ([`tail_csum`]).
    pub tail_csum: u16,
    /// Zero.
    pub pad: u16,
    /// Answer, authority and additional sections, as the engine renders them.
    pub tail: [u8; ANSWER_TAIL_MAX],
}

/// The ones' complement sum (RFC 1071) of `bytes` folded to 16 bits, in the byte order of
/// this machine's memory (the program adds it to sums it gets from `bpf_csum_diff`, which
/// reads 16-bit words from memory as they are), with `bytes` starting at an even offset.
pub fn tail_csum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut pairs = bytes.chunks_exact(2);
    for p in &mut pairs {
        sum += u64::from(u16::from_ne_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        sum += u64::from(u16::from_ne_bytes([*last, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // Cannot truncate: folded to 16 bits above.
    sum as u16
}

/// `struct skua_cache_ref`: where a cached answer's recipe is.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
#[repr(C)]
pub struct CacheRef {
    /// Index into [`MAP_CACHE_SLOTS`].
    pub slot: u32,
}

/// `struct skua_cached`: a cached answer's recipe (see `bpf/skua_xdp_abi.h`): an
/// [`AnswerValue`] whose TTLs the program writes, each expiry minus its clock's second.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
#[repr(C)]
pub struct CachedValue {
    /// The key this slot answers; the program checks it against the query's.
    pub key: AnswerKey,
    /// skuad's second from which the program leaves the question to the engine.
    pub valid_until: u32,
    /// As [`AnswerValue::flags`].
    pub flags: u16,
    /// ANCOUNT.
    pub ancount: u16,
    /// NSCOUNT.
    pub nscount: u16,
    /// ARCOUNT, not counting the OPT record.
    pub arcount: u16,
    /// Bytes of `tail` used.
    pub tail_len: u16,
    /// UDP payload size advertised in the reply's OPT record.
    pub edns_size: u16,
    /// Entries of `ttl_off`/`ttl_exp` in use.
    pub nttl: u8,
    /// Zero.
    pub pad: [u8; 3],
    /// TTL field offsets in `tail`; unused ones [`CACHED_NO_TTL`].
    pub ttl_off: [u16; CACHED_TTLS],
    /// Expiries, skuad's seconds, each `>= valid_until`; unused ones `valid_until`.
    pub ttl_exp: [u32; CACHED_TTLS],
    /// Records, TTL fields zero.
    pub tail: [u8; ANSWER_TAIL_MAX],
}

/// `struct skua_acl_key`: an LPM trie key over IPv6 space (IPv4 as `::ffff:a.b.c.d`).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
#[repr(C)]
pub struct AclKey {
    /// Prefix length, 0..=128.
    pub prefixlen: u32,
    /// Address, network byte order.
    pub addr: [u8; 16],
}

// SAFETY: `AnswerKey`, `AnswerValue` and `AclKey` are `#[repr(C)]`, made only of integers
// and byte arrays, with no padding (sizes asserted below equal the sums of their fields), so
// every bit pattern is a valid value and they may be copied to and from the kernel as bytes.
unsafe impl aya::Pod for AnswerKey {}
// SAFETY: as above.
unsafe impl aya::Pod for AnswerValue {}
// SAFETY: as above.
unsafe impl aya::Pod for AclKey {}
// SAFETY: as above.
unsafe impl aya::Pod for CacheRef {}
// SAFETY: as above (`pad` fills the only gap; size asserted below).
unsafe impl aya::Pod for CachedValue {}

/// `enum skua_xdp_stat`: index into [`MAP_STATS`].
///
/// Every frame counts [`Stat::Seen`] plus exactly one other counter.
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
#[repr(u32)]
pub enum Stat {
    /// Frames the program looked at.
    Seen = 0,
    /// UDP to our port and address: sent to the XSK (or passed if no socket on that queue).
    Redirected = 1,
    /// ARP, LLDP, a second VLAN tag, a frame too short for its L2 header, ...
    PassNotIp = 2,
    /// TCP (incl. DNS over TCP), ICMP, ...
    PassNotUdp = 3,
    /// UDP to another port.
    PassOtherPort = 4,
    /// UDP to our port but not to one of our unicast addresses: another address (health
    /// checks, other services, another host's), or a frame to an Ethernet group address
    /// (broadcast, multicast).
    PassOtherDest = 5,
    /// IPv4 fragments: reassembly is the kernel's job.
    PassFragment = 6,
    /// IPv4 with options (IHL > 5).
    PassIpOptions = 7,
    /// IPv6 with extension headers.
    PassIpv6Ext = 8,
    /// `F_ENABLED` clear.
    PassDisabled = 9,
    /// Truncated or inconsistent IP/UDP headers or lengths, IHL < 5, wrong IP version.
    DropMalformed = 10,
    /// Answered in the program from [`MAP_ANSWERS`] (`XDP_TX` or redirect to the ingress device).
    Answered = 11,
    /// UDP to our port and address from a source that cannot be answered (the reply would go
    /// to a group or unspecified address): a group source MAC, or an unspecified, broadcast
    /// or multicast source IP (IPv4 0.0.0.0 and 224.0.0.0 up, IPv6 `::` and ff00::/8).
    /// Passed to the kernel; `skua-fastpath` drops the same frames as `not_unicast_source`.
    PassBadSource = 12,
    /// Answered in the program from the resolver's cached answers ([`MAP_CACHE_SLOTS`]).
    AnsweredCached = 13,
    /// To a service address whose lease is over ([`Dest::lease_until_ns`]): passed to the
    /// kernel sockets, which drop it.
    PassNoLease = 14,
}

impl Stat {
    /// Number of counters (`SKUA_STAT_MAX`).
    pub const COUNT: usize = 15;

    /// All counters, in index order.
    pub const ALL: [Self; Self::COUNT] = [
        Self::Seen,
        Self::Redirected,
        Self::PassNotIp,
        Self::PassNotUdp,
        Self::PassOtherPort,
        Self::PassOtherDest,
        Self::PassFragment,
        Self::PassIpOptions,
        Self::PassIpv6Ext,
        Self::PassDisabled,
        Self::DropMalformed,
        Self::Answered,
        Self::PassBadSource,
        Self::AnsweredCached,
        Self::PassNoLease,
    ];

    /// Index into the stats map and into arrays of `COUNT` values.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Stable snake-case name for metrics (`skua_xdp_frames_total{outcome="..."}`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Seen => "seen",
            Self::Redirected => "redirected",
            Self::PassNotIp => "pass_not_ip",
            Self::PassNotUdp => "pass_not_udp",
            Self::PassOtherPort => "pass_other_port",
            Self::PassOtherDest => "pass_other_dest",
            Self::PassFragment => "pass_fragment",
            Self::PassIpOptions => "pass_ip_options",
            Self::PassIpv6Ext => "pass_ipv6_ext",
            Self::PassDisabled => "pass_disabled",
            Self::DropMalformed => "drop_malformed",
            Self::Answered => "answered",
            Self::PassBadSource => "pass_bad_source",
            Self::AnsweredCached => "answered_cached",
            Self::PassNoLease => "pass_no_lease",
        }
    }
}

const _: () = {
    assert!(size_of::<XdpConfig>() == 16);
    assert!(offset_of!(XdpConfig, clock_origin_ns) == 8);
    assert!(offset_of!(XdpConfig, port) == 0);
    assert!(offset_of!(XdpConfig, flags) == 2);
    assert!(offset_of!(XdpConfig, pad) == 4);
    assert!(size_of::<Stat>() == size_of::<u32>());
    assert!(Stat::PassNoLease as usize + 1 == Stat::COUNT);
    assert!(size_of::<Dest>() == 8);
    assert!(size_of::<CacheRef>() == 4);
    assert!(offset_of!(CachedValue, valid_until) == 68);
    assert!(offset_of!(CachedValue, flags) == 72);
    assert!(offset_of!(CachedValue, nttl) == 84);
    assert!(offset_of!(CachedValue, ttl_off) == 88);
    assert!(offset_of!(CachedValue, ttl_exp) == 120);
    assert!(offset_of!(CachedValue, tail) == 184);
    assert!(size_of::<CachedValue>() == 184 + ANSWER_TAIL_MAX);
    assert!(size_of::<AnswerKey>() == 4 + ANSWER_NAME_MAX);
    assert!(offset_of!(AnswerKey, qtype) == 0);
    assert!(offset_of!(AnswerKey, name_len) == 2);
    assert!(offset_of!(AnswerKey, name) == 4);
    assert!(size_of::<AnswerValue>() == 16 + ANSWER_TAIL_MAX);
    assert!(offset_of!(AnswerValue, ancount) == 2);
    assert!(offset_of!(AnswerValue, tail_len) == 8);
    assert!(offset_of!(AnswerValue, edns_size) == 10);
    assert!(offset_of!(AnswerValue, tail_csum) == 12);
    assert!(offset_of!(AnswerValue, tail) == 16);
    assert!(size_of::<AclKey>() == 20);
    assert!(offset_of!(AclKey, addr) == 4);
    let mut i = 0;
    while i < Stat::COUNT {
        assert!(Stat::ALL[i] as usize == i);
        i += 1;
    }
};
