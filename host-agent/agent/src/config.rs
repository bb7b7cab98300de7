//! The agent's configuration file (TOML).
//!
//! Why TOML and not an `unbound.conf`-style clause: the agent runs on the host, beside (not
//! inside) the appliance whose `unbound.conf` skuad reads, and its settings are nested
//! lists (VRRP instances, each with addresses and peers; health checks; physical functions,
//! each with its VFs) that unbound.conf's flat `clause:` / `key: value` lines express only
//! by repetition and position. TOML has typed values and arrays of tables, and its reader
//! reports the line and column of every error; keepalived's own syntax is not a format
//! worth reproducing. `docs/ha.md` maps every keepalived keyword used here.

use std::net::IpAddr;
use std::path::Path;

use serde::Deserialize;

use crate::addr::{Vip, parse_vips};

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[agent]`: the agent itself.
    #[serde(default)]
    pub agent: Agent,
    /// `[[vrrp]]`: the VRRP instances (one per address family and virtual router).
    #[serde(default)]
    pub vrrp: Vec<Instance>,
    /// `[[check]]`: health checks (every instance follows all of them).
    #[serde(default)]
    pub check: Vec<crate::health::CheckConfig>,
    /// `[[sriov]]`: physical functions whose VFs the agent sets up (docs/ha.md, "NIC
    /// passthrough").
    #[serde(default)]
    pub sriov: Vec<skua_sriov::PfConfig>,
    /// `[[anycast]]`: service prefixes announced through the routing daemon while the
    /// critical checks pass.
    #[serde(default)]
    pub anycast: Vec<crate::anycast::AnycastConfig>,
}

/// `[agent]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The name in logs and in skuad's audit log (`holder`). Default: the host name.
    #[serde(default)]
    pub name: Option<String>,
    /// How to reach skuad: `unix:PATH` (its control socket, the default
    /// `unix:/run/skua/control.sock`) or `http://ADDR:PORT` (its REST API, with `token`).
    #[serde(default = "default_skuad")]
    pub skuad: String,
    /// The API token for `http://` (role operator): `env:VAR` or `file:PATH`, never the
    /// secret itself.
    #[serde(default)]
    pub token: Option<String>,
    /// Where the agent serves `/metrics` and `/status` (`skuactl ha status`). Default
    /// `127.0.0.1:9853`; `"off"`: not at all.
    #[serde(default = "default_listen")]
    pub listen: String,
}

impl Default for Agent {
    fn default() -> Self {
        Agent {
            name: None,
            skuad: default_skuad(),
            token: None,
            listen: default_listen(),
        }
    }
}

fn default_skuad() -> String {
    "unix:/run/skua/control.sock".into()
}

fn default_listen() -> String {
    "127.0.0.1:9853".into()
}

/// `[[vrrp]]`: one virtual router (keepalived's `vrrp_instance`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    /// A name for logs and metrics.
    pub name: String,
    /// The interface the adverts go out on and the addresses are added to.
    pub interface: String,
    /// `virtual_router_id`, 1-255.
    pub vrid: u8,
    /// 1-255 (255: the address owner). Default 100.
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// `advert_int` in milliseconds, a multiple of 10 (VRRPv3 counts centiseconds),
    /// 10-40950. Default 1000.
    #[serde(default = "default_advert")]
    pub advert_interval_ms: u32,
    /// Preempt a lower-priority master (keepalived: absent `nopreempt`). Default true.
    #[serde(default = "yes")]
    pub preempt: bool,
    /// keepalived's `preempt_delay`, in milliseconds. Default 0.
    #[serde(default)]
    pub preempt_delay_ms: u32,
    /// RFC 9568 Accept_Mode: a non-owner master accepts packets to the addresses (needed
    /// to answer DNS on them). Default true.
    #[serde(default = "yes")]
    pub accept: bool,
    /// The virtual addresses (`virtual_ipaddress`), `ADDR` or `ADDR/PREFIX`, all of one
    /// family. They are skuad's `ha: address:` entries.
    pub addresses: Vec<String>,
    /// The source of the adverts (keepalived's `unicast_src_ip`). Default: the
    /// interface's first address of the family (IPv6: its link-local address).
    #[serde(default)]
    pub source: Option<IpAddr>,
    /// Unicast peers instead of the multicast group (keepalived's `unicast_peer`).
    #[serde(default)]
    pub unicast_peers: Vec<IpAddr>,
    /// keepalived's `old_unicast_checksum` (peers older than keepalived 1.3).
    #[serde(default)]
    pub old_unicast_checksum: bool,
    /// With `unicast_peers`: require TTL / hop limit 255 on received adverts, as RFC 9568
    /// §7.1 does (and multicast mode always does), so that an advert forged from off the
    /// link with a peer's address is dropped. Default true. false: any TTL, for peers
    /// across routers or keepalived peers sending IPv6 unicast adverts with its default
    /// hop limit 64 (set `unicast_ttl 255` in keepalived instead where it can be).
    #[serde(default = "yes")]
    pub strict_unicast_ttl: bool,
    /// The lease asked of skuad, in milliseconds. Default: 2.5 advert intervals. Must
    /// exceed one interval (it is renewed each interval) and stay below three (the
    /// shortest master-down interval of a peer), so that a master that stops renewing has
    /// stopped answering before any backup takes over (docs/ha.md).
    #[serde(default)]
    pub lease_ms: Option<u32>,
    /// Add the addresses to the interface when master and remove them otherwise (as
    /// keepalived does). Default true. Off: something else configures them.
    #[serde(default = "yes")]
    pub manage_addresses: bool,
}

fn default_priority() -> u8 {
    100
}

fn default_advert() -> u32 {
    1000
}

fn yes() -> bool {
    true
}

impl Instance {
    /// The lease in milliseconds (default 2.5 intervals).
    pub fn lease(&self) -> u32 {
        self.lease_ms
            .unwrap_or(self.advert_interval_ms.saturating_mul(5) / 2)
    }

    /// The virtual addresses, parsed.
    pub fn vips(&self) -> Result<Vec<Vip>, String> {
        parse_vips(&self.addresses)
    }

    fn check(&self) -> Result<(), String> {
        let a = self.advert_interval_ms;
        if !(10..=40950).contains(&a) || !a.is_multiple_of(10) {
            return Err(format!(
                "advert_interval_ms = {a}: must be a multiple of 10 between 10 and 40950 \
                 (VRRPv3 counts centiseconds)"
            ));
        }
        let vips = self.vips()?;
        let Some(first) = vips.first() else {
            return Err("addresses is empty".into());
        };
        if vips
            .iter()
            .any(|v| v.addr.is_ipv4() != first.addr.is_ipv4())
        {
            return Err("addresses mixes IPv4 and IPv6 (one [[vrrp]] per family)".into());
        }
        let lease = self.lease();
        // Renewed once per interval: a lease shorter than interval + 20 ms would lapse on
        // an ordinary scheduling delay. A backup takes over after at least 3 intervals
        // (plus skew) of silence: the lease must end before that.
        if lease < a + 20 || lease >= 3 * a {
            return Err(format!(
                "lease_ms = {lease}: must be at least advert_interval_ms + 20 ({}) and below \
                 3 x advert_interval_ms ({}), see docs/ha.md",
                a + 20,
                3 * a
            ));
        }
        if self.vrid == 0 {
            return Err("vrid must be 1-255".into());
        }
        if self.priority == 0 {
            return Err("priority must be 1-255 (0 is reserved for a master leaving)".into());
        }
        if !self.strict_unicast_ttl && self.unicast_peers.is_empty() {
            return Err(
                "strict_unicast_ttl = false needs unicast_peers (multicast adverts \
                 must have TTL / hop limit 255, RFC 9568 §7.1)"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Reads and checks `path`: errors name the file, the line and the reason.
pub fn load(path: &Path) -> Result<Config, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// Parses and checks a configuration text (`name` for messages).
pub fn parse(text: &str, name: &str) -> Result<Config, String> {
    let cfg: Config = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        match line {
            Some(l) => format!("{name}:{l}: {}", e.message()),
            None => format!("{name}: {}", e.message()),
        }
    })?;
    for (i, inst) in cfg.vrrp.iter().enumerate() {
        inst.check()
            .map_err(|e| format!("{name}: [[vrrp]] #{} ({}): {e}", i + 1, inst.name))?;
        if cfg.vrrp[..i].iter().any(|o| {
            o.name == inst.name
                || (o.interface == inst.interface
                    && o.vrid == inst.vrid
                    && o.vips().ok().map(|v| v[0].addr.is_ipv4())
                        == inst.vips().ok().map(|v| v[0].addr.is_ipv4()))
        }) {
            return Err(format!(
                "{name}: [[vrrp]] #{} ({}): same name, or same interface, vrid and family, as an earlier one",
                i + 1,
                inst.name
            ));
        }
    }
    for (i, c) in cfg.check.iter().enumerate() {
        c.check()
            .map_err(|e| format!("{name}: [[check]] #{} ({}): {e}", i + 1, c.name))?;
        if cfg.check[..i].iter().any(|o| o.name == c.name) {
            return Err(format!(
                "{name}: [[check]] #{} ({}): same name as an earlier one",
                i + 1,
                c.name
            ));
        }
    }
    skua_sriov::validate(&cfg.sriov).map_err(|e| format!("{name}: [[sriov]]: {e}"))?;
    for (i, a) in cfg.anycast.iter().enumerate() {
        a.check()
            .map_err(|e| format!("{name}: [[anycast]] #{} ({}): {e}", i + 1, a.name))?;
        if cfg.anycast[..i].iter().any(|o| o.name == a.name) {
            return Err(format!(
                "{name}: [[anycast]] #{} ({}): same name as an earlier one",
                i + 1,
                a.name
            ));
        }
        let vrrp: Vec<(&str, Vec<Vip>)> = cfg
            .vrrp
            .iter()
            .map(|v| (v.name.as_str(), v.vips().unwrap_or_default()))
            .collect();
        crate::anycast::check_against(a, &cfg.anycast[..i], &vrrp, &cfg.check)
            .map_err(|e| format!("{name}: [[anycast]] #{} ({}): {e}", i + 1, a.name))?;
    }
    if cfg.agent.skuad.strip_prefix("unix:").is_none()
        && cfg.agent.skuad.strip_prefix("http://").is_none()
    {
        return Err(format!(
            "{name}: [agent] skuad = '{}': must be unix:PATH or http://ADDR:PORT",
            cfg.agent.skuad
        ));
    }
    if let Some(t) = &cfg.agent.token
        && !(t.starts_with("env:") || t.starts_with("file:"))
    {
        return Err(format!(
            "{name}: [agent] token: must be env:VAR or file:PATH (the secret itself is never \
             written in the configuration)"
        ));
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[agent]
name = "node1"

[[vrrp]]
name = "dns4"
interface = "eth0"
vrid = 51
priority = 150
advert_interval_ms = 100
addresses = ["198.18.53.53/32", "198.18.53.54"]

[[vrrp]]
name = "dns6"
interface = "eth0"
vrid = 51
advert_interval_ms = 100
addresses = ["fd00:53::53/64"]
unicast_peers = ["fe80::2"]
"#;

    #[test]
    fn a_good_file_with_defaults() {
        let c = parse(GOOD, "a.toml").unwrap();
        assert_eq!(c.agent.name.as_deref(), Some("node1"));
        assert_eq!(c.agent.skuad, "unix:/run/skua/control.sock");
        assert_eq!(c.vrrp.len(), 2);
        let v4 = &c.vrrp[0];
        assert_eq!((v4.priority, v4.preempt, v4.accept), (150, true, true));
        assert_eq!(v4.lease(), 250, "2.5 intervals");
        assert_eq!(
            v4.vips().unwrap()[1],
            Vip {
                addr: "198.18.53.54".parse().unwrap(),
                prefix: 32
            }
        );
        assert_eq!(c.vrrp[1].priority, 100);
        assert_eq!(c.vrrp[1].vips().unwrap()[0].prefix, 64);
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let c = parse(
            include_str!("../../agent.example.toml"),
            "agent.example.toml",
        )
        .unwrap();
        assert_eq!((c.vrrp.len(), c.check.len()), (2, 2));
    }

    #[test]
    fn sriov_tables_are_read_and_checked_with_the_rest() {
        let ok = "[[sriov]]\npf = \"enp3s0\"\nnumvfs = 2\n[[sriov.vf]]\nindex = 0\nmac = \"02:00:00:00:53:01\"\nvfio = true\n";
        let c = parse(ok, "a.toml").unwrap();
        assert_eq!((c.sriov.len(), c.sriov[0].vfs.len()), (1, 1));
        let bad = ok.replace("index = 0", "index = 0\nvlan = 4095");
        let e = parse(&bad, "a.toml").unwrap_err();
        assert!(
            e.starts_with("a.toml: [[sriov]]:") && e.contains("vlan = 4095"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_reason() {
        let e = parse("[agent]\nname = \"x\"\nbogus = 1\n", "a.toml").unwrap_err();
        assert!(e.starts_with("a.toml:3: unknown field `bogus`"), "{e}");
        let e = parse(
            "[[vrrp]]\nname = \"x\"\ninterface = \"e\"\nvrid = 300\naddresses = []\n",
            "a.toml",
        )
        .unwrap_err();
        assert!(e.starts_with("a.toml:4:"), "{e}");
        for (patch, want) in [
            ("advert_interval_ms = 105", "multiple of 10"),
            ("lease_ms = 300", "below 3 x advert_interval_ms (300)"),
            ("lease_ms = 110", "at least advert_interval_ms + 20 (120)"),
            (
                "addresses = [\"198.18.53.53\", \"fd00::1\"]",
                "mixes IPv4 and IPv6",
            ),
            ("addresses = [\"198.18.53.53/33\"]", "bad prefix length"),
            ("addresses = [\"dns.example\"]", "not an IP address"),
            ("addresses = []", "addresses is empty"),
            ("priority = 0", "priority must be 1-255"),
            (
                "strict_unicast_ttl = false",
                "strict_unicast_ttl = false needs unicast_peers",
            ),
        ] {
            let addresses = if patch.starts_with("addresses") {
                ""
            } else {
                "addresses = [\"198.18.53.53\"]"
            };
            let interval = if patch.starts_with("advert") {
                ""
            } else {
                "advert_interval_ms = 100"
            };
            let text = format!(
                "[[vrrp]]\nname = \"v\"\ninterface = \"e\"\nvrid = 1\n{interval}\n{addresses}\n{patch}\n"
            );
            let e = parse(&text, "a.toml").unwrap_err();
            assert!(
                e.contains(want) && e.starts_with("a.toml: [[vrrp]] #1 (v)"),
                "{patch}: {e}"
            );
        }
        let e = parse("[agent]\nskuad = \"tcp:1.2.3.4\"\n", "a.toml").unwrap_err();
        assert!(e.contains("unix:PATH or http://"), "{e}");
        let e = parse("[agent]\ntoken = \"s3cret\"\n", "a.toml").unwrap_err();
        assert!(e.contains("env:VAR or file:PATH"), "{e}");
        let dup = format!(
            "{GOOD}\n[[vrrp]]\nname = \"dns4\"\ninterface = \"eth1\"\nvrid = 9\naddresses = [\"198.18.0.9\"]\n"
        );
        assert!(parse(&dup, "a.toml").unwrap_err().contains("same name"));
    }

    const CANARY: &str = r#"
[[check]]
name = "canary"
kind = "dns-udp"
target = "127.0.0.1:53"
query = "a.example. A"
"#;

    #[test]
    fn anycast_sections_with_defaults() {
        let text = format!(
            "{CANARY}\n[[anycast]]\nname = \"dns\"\naddresses = [\"198.18.99.53/32\", \"fd00:99::53\", \"198.18.100.0/24\"]\n"
        );
        let c = parse(&text, "a.toml").unwrap();
        let a = &c.anycast[0];
        assert_eq!(a.interface, "skua-any0");
        let p = a.prefixes().unwrap();
        assert_eq!(
            p.iter().map(|v| v.prefix).collect::<Vec<_>>(),
            [32, 128, 24]
        );
    }

    #[test]
    fn anycast_errors_name_the_section_and_the_reason() {
        let any = |body: &str| format!("[[anycast]]\nname = \"dns\"\n{body}\n");
        for (text, want) in [
            (
                format!("{CANARY}{}", any("addresses = []")),
                "addresses is empty",
            ),
            (
                format!("{CANARY}{}", any("addresses = [\"224.0.0.53\"]")),
                "not a routable unicast address",
            ),
            (
                format!("{CANARY}{}", any("addresses = [\"fe80::53\"]")),
                "not a routable unicast address",
            ),
            (
                format!(
                    "{CANARY}{}",
                    any("addresses = [\"198.18.99.53\", \"198.18.99.53/32\"]")
                ),
                "listed twice",
            ),
            (
                format!(
                    "{CANARY}{}",
                    any("interface = \"a-very-long-name0\"\naddresses = [\"198.18.99.53\"]")
                ),
                "not a valid interface name",
            ),
            (
                any("addresses = [\"198.18.99.53\"]"),
                "no critical [[check]] (weight = 0)",
            ),
            (
                format!(
                    "{CANARY}weight = -10\n{}",
                    any("addresses = [\"198.18.99.53\"]")
                ),
                "no critical [[check]]",
            ),
            (
                format!(
                    "{}{}",
                    CANARY.replace("127.0.0.1:53", "198.18.99.53:53"),
                    any("addresses = [\"198.18.99.53\"]")
                ),
                "check canary asks 198.18.99.53:53, inside the anycast prefix 198.18.99.53/32",
            ),
            (
                format!(
                    "{}{}",
                    CANARY.replace("127.0.0.1:53", "[fd00:99::1]:53"),
                    any("addresses = [\"fd00:99::53/64\"]")
                ),
                "inside the anycast prefix fd00:99::53/64",
            ),
            (
                format!("{GOOD}{CANARY}{}", any("addresses = [\"198.18.53.54\"]")),
                "also a VRRP address of [[vrrp]] dns4",
            ),
            (
                format!(
                    "{CANARY}{}{}",
                    any("addresses = [\"198.18.99.53\"]"),
                    any("addresses = [\"198.18.99.54\"]")
                ),
                "same name as an earlier one",
            ),
            (
                format!(
                    "{CANARY}{}[[anycast]]\nname = \"other\"\naddresses = [\"198.18.99.53\"]\n",
                    any("addresses = [\"198.18.99.53\"]")
                ),
                "address 198.18.99.53 is also in [[anycast]] dns",
            ),
        ] {
            let e = parse(&text, "a.toml").unwrap_err();
            assert!(
                e.contains(want) && e.contains("[[anycast]] #"),
                "{text}\n=> {e}"
            );
        }
        let e = parse(
            &format!(
                "{CANARY}[[anycast]]\nname = \"x\"\naddresses = [\"198.18.99.53\"]\nbgp = 1\n"
            ),
            "a.toml",
        )
        .unwrap_err();
        assert!(e.contains("unknown field `bgp`"), "{e}");
    }
}
