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
/// HASH: key = IPv4 destination in network byte order (`u32`), value = `u8` 1 (`SKUA_MAP_DST4`).
pub const MAP_DST4: &str = "skua_dst4";
/// HASH: key = IPv6 destination (16 bytes), value = `u8` 1 (`SKUA_MAP_DST6`).
pub const MAP_DST6: &str = "skua_dst6";
/// PERCPU_ARRAY: key = [`Stat`], value = `u64` (`SKUA_MAP_STATS`).
pub const MAP_STATS: &str = "skua_stats";

/// Entries in the XSKMAP: the highest rx queue index served is `MAX_QUEUES - 1`.
pub const MAX_QUEUES: u32 = 256;
/// Entries in each destination map.
pub const MAX_DESTS: u32 = 1024;

/// `SKUA_F_ENABLED`: redirect at all (clear = `XDP_PASS` everything).
pub const F_ENABLED: u16 = 0x0001;
/// `SKUA_F_ANY_V4`: every IPv4 destination is ours (no `skua_dst4` lookup).
pub const F_ANY_V4: u16 = 0x0002;
/// `SKUA_F_ANY_V6`: every IPv6 destination is ours (no `skua_dst6` lookup).
pub const F_ANY_V6: u16 = 0x0004;

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
}

impl XdpConfig {
    /// Enabled, serving `port`, for the destinations in the maps only.
    pub const fn enabled(port: u16) -> Self {
        Self {
            port,
            flags: F_ENABLED,
            pad: 0,
        }
    }

    /// Everything passes to the kernel.
    pub const fn disabled() -> Self {
        Self {
            port: 0,
            flags: 0,
            pad: 0,
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

// SAFETY: `XdpConfig` is `#[repr(C)]`, made only of integers, with no padding (size 8 =
// 2 + 2 + 4, asserted below), so every bit pattern is a valid value and it may be copied to
// and from the kernel as bytes, which is all `aya::Pod` requires.
unsafe impl aya::Pod for XdpConfig {}

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
    /// UDP to our port but another address (health checks, other services).
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
}

impl Stat {
    /// Number of counters (`SKUA_STAT_MAX`).
    pub const COUNT: usize = 11;

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
        }
    }
}

const _: () = {
    assert!(size_of::<XdpConfig>() == 8);
    assert!(offset_of!(XdpConfig, port) == 0);
    assert!(offset_of!(XdpConfig, flags) == 2);
    assert!(offset_of!(XdpConfig, pad) == 4);
    assert!(size_of::<Stat>() == size_of::<u32>());
    assert!(Stat::DropMalformed as usize + 1 == Stat::COUNT);
    let mut i = 0;
    while i < Stat::COUNT {
        assert!(Stat::ALL[i] as usize == i);
        i += 1;
    }
};
