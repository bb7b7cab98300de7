//! The `[[sriov]]` configuration of the agent: one table per physical function (PF), one
//! `[[sriov.vf]]` per virtual function (VF) to configure. Field types reject malformed
//! values while the TOML is read (the TOML reader names the line); [`validate`] checks what
//! needs the whole table (ranges, indexes below `numvfs`, duplicates) and names the field.
//!
//! ```toml
//! [[sriov]]
//! pf = "enp3s0"          # or a PCI address: "0000:03:00.0"
//! numvfs = 2
//! autoprobe = false      # sriov_drivers_autoprobe once configured (default false)
//!
//! [[sriov.vf]]
//! index = 0
//! mac = "02:00:00:00:53:01"
//! vlan = 100
//! qos = 0
//! spoofchk = true
//! trust = false
//! link_state = "auto"
//! vfio = true
//! qemu_id = "skua-wan"
//! proxmox = { vmid = 120, slot = 0 }
//! ```
//!
//! An attribute left out is not managed: the agent neither sets nor resets it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A PCI address, `DDDD:BB:DD.F` (domain, bus, device, function), as sysfs names devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PciAddr {
    /// PCI segment (domain); 0 on most machines, above 0xffff behind Intel VMD.
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for PciAddr {
    type Err = String;

    /// `0000:03:00.0`, or `03:00.0` (domain 0), as `lspci -D` and sysfs write them.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{s:?} is not a PCI address like 0000:03:00.0 ({why})");
        let parts: Vec<&str> = s.split(':').collect();
        let (domain, bus, devfn) = match parts.as_slice() {
            [d, b, df] => (*d, *b, *df),
            [b, df] => ("0", *b, *df),
            _ => return Err(bad("expected DOMAIN:BUS:DEVICE.FUNCTION")),
        };
        let (dev, func) = devfn.split_once('.').ok_or_else(|| bad("no .FUNCTION"))?;
        let hex = |t: &str, max_len: usize, what: &str| {
            if t.is_empty() || t.len() > max_len || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad(&format!("{what} must be 1 to {max_len} hex digits")));
            }
            u32::from_str_radix(t, 16).map_err(|_| bad(what))
        };
        let domain = hex(domain, 8, "domain")?;
        let bus = hex(bus, 2, "bus")? as u8;
        let device = hex(dev, 2, "device")?;
        let function = hex(func, 1, "function")?;
        if device > 31 {
            return Err(bad("device above 1f"));
        }
        if function > 7 {
            return Err(bad("function above 7"));
        }
        Ok(PciAddr {
            domain,
            bus,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl TryFrom<String> for PciAddr {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<PciAddr> for String {
    fn from(a: PciAddr) -> String {
        a.to_string()
    }
}

/// An Ethernet MAC address, written `02:00:00:00:53:01`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// True for 00:00:00:00:00:00 (what drivers report for a VF whose MAC was never set).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 6]
    }

    /// True when the group bit is set (multicast or broadcast): not a VF address.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a MAC address like 02:00:00:00:53:01");
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.split(':') {
            // from_str_radix alone would take "+f".
            if n == 6 || part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| bad())?;
            n += 1;
        }
        if n != 6 {
            return Err(bad());
        }
        Ok(MacAddr(out))
    }
}

impl TryFrom<String> for MacAddr {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<MacAddr> for String {
    fn from(m: MacAddr) -> String {
        m.to_string()
    }
}

/// How the PF is named: by its network interface or by its PCI address (a PF whose driver
/// has no netdev, or whose name udev may change).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum PfRef {
    /// A network interface name, e.g. `enp3s0`.
    Iface(String),
    /// A PCI address, e.g. `0000:03:00.0`.
    Pci(PciAddr),
}

impl fmt::Display for PfRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PfRef::Iface(n) => f.write_str(n),
            PfRef::Pci(a) => a.fmt(f),
        }
    }
}

impl FromStr for PfRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // Interface names never contain ':' (net/core/dev.c dev_valid_name), so a ':' means
        // a PCI address and a malformed one is reported as such.
        if s.contains(':') {
            return s.parse().map(PfRef::Pci);
        }
        // dev_valid_name: 1..IFNAMSIZ-1 bytes, not "." or "..", no '/' or white space.
        if s.is_empty() || s.len() > 15 {
            return Err(format!(
                "{s:?} is not an interface name (1 to 15 characters) nor a PCI address"
            ));
        }
        if s == "." || s == ".." || s.bytes().any(|b| b == b'/' || b.is_ascii_whitespace()) {
            return Err(format!("{s:?} is not a valid interface name"));
        }
        Ok(PfRef::Iface(s.to_string()))
    }
}

impl TryFrom<String> for PfRef {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<PfRef> for String {
    fn from(p: PfRef) -> String {
        p.to_string()
    }
}

/// A VF's administrative link state (`ip link set PF vf N state ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkState {
    /// The VF's link follows the PF's (IFLA_VF_LINK_STATE_AUTO).
    Auto,
    /// Always up (IFLA_VF_LINK_STATE_ENABLE).
    Enable,
    /// Always down (IFLA_VF_LINK_STATE_DISABLE).
    Disable,
}

impl fmt::Display for LinkState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkState::Auto => "auto",
            LinkState::Enable => "enable",
            LinkState::Disable => "disable",
        })
    }
}

/// Where a Proxmox VE VM takes the VF: `qm set VMID -hostpciSLOT ADDR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxmoxTarget {
    /// The VM id (Proxmox allows 100..=999999999).
    pub vmid: u32,
    /// The `hostpciN` slot, 0..=15.
    pub slot: u8,
}

/// One `[[sriov]]` table: a physical function and its VFs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PfConfig {
    /// The PF: interface name or PCI address.
    pub pf: PfRef,
    /// How many VFs to create (`sriov_numvfs`).
    pub numvfs: u16,
    /// `sriov_drivers_autoprobe` once the VFs are configured: true lets host drivers (igbvf,
    /// iavf, ...) bind to the VFs not given to vfio-pci. Default false. The agent writes 0
    /// before creating VFs in any case, so no driver binds before the MAC is set.
    #[serde(default)]
    pub autoprobe: bool,
    /// The VFs to configure (`[[sriov.vf]]`); VFs not listed are created and left alone.
    #[serde(default, rename = "vf")]
    pub vfs: Vec<VfConfig>,
}

/// One `[[sriov.vf]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VfConfig {
    /// VF index, below `numvfs`.
    pub index: u16,
    /// The VF's MAC address (unicast, not zero).
    #[serde(default)]
    pub mac: Option<MacAddr>,
    /// Port VLAN (802.1Q tag inserted and stripped by the NIC), 1..=4094.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// 802.1p priority of the port VLAN, 0..=7 (needs `vlan`; default 0).
    #[serde(default)]
    pub qos: Option<u8>,
    /// MAC/VLAN anti-spoofing on the VF's transmit side.
    #[serde(default)]
    pub spoofchk: Option<bool>,
    /// Trusted VF (may change its MAC, enter promiscuous mode).
    #[serde(default)]
    pub trust: Option<bool>,
    /// Administrative link state.
    #[serde(default)]
    pub link_state: Option<LinkState>,
    /// Bind the VF to vfio-pci so a VM can take it.
    #[serde(default)]
    pub vfio: bool,
    /// QEMU device id for the emitted `-device vfio-pci,...` line (default `skua-vfN`).
    #[serde(default)]
    pub qemu_id: Option<String>,
    /// Proxmox VM and slot for the emitted `qm set` line.
    #[serde(default)]
    pub proxmox: Option<ProxmoxTarget>,
}

impl VfConfig {
    /// The QEMU device id: `qemu_id`, else `skua-vf<index>`.
    pub fn qemu_device_id(&self) -> String {
        self.qemu_id
            .clone()
            .unwrap_or_else(|| format!("skua-vf{}", self.index))
    }
}

/// Every problem [`validate`] found, each naming its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid [[sriov]] configuration: {}", problems.join("; "))]
pub struct ConfigError {
    /// One line per problem, e.g. `sriov[0].vf[1] (index 3): vlan = 4095 is not in 1..=4094`.
    pub problems: Vec<String>,
}

/// Checks what the field types cannot: ranges, VF indexes below `numvfs`, no duplicate PF,
/// VF index, MAC, QEMU id or Proxmox slot, options that need another (`qos` needs `vlan`,
/// `qemu_id` and `proxmox` need `vfio = true`).
pub fn validate(pfs: &[PfConfig]) -> Result<(), ConfigError> {
    let mut problems = Vec::new();
    let mut seen_pf = BTreeMap::new();
    let mut seen_mac: BTreeMap<MacAddr, String> = BTreeMap::new();
    let mut seen_qemu: BTreeMap<String, String> = BTreeMap::new();
    let mut seen_slot: BTreeMap<(u32, u8), String> = BTreeMap::new();
    for (i, pf) in pfs.iter().enumerate() {
        let at = format!("sriov[{i}] (pf = \"{}\")", pf.pf);
        if let Some(first) = seen_pf.insert(pf.pf.clone(), i) {
            problems.push(format!("{at}: pf is already configured in sriov[{first}]"));
        }
        let mut seen_index = BTreeSet::new();
        for (j, vf) in pf.vfs.iter().enumerate() {
            let at = format!(
                "sriov[{i}].vf[{j}] (pf = \"{}\", index = {})",
                pf.pf, vf.index
            );
            if vf.index >= pf.numvfs {
                problems.push(format!(
                    "{at}: index must be below numvfs = {} (VFs are numbered from 0)",
                    pf.numvfs
                ));
            }
            if !seen_index.insert(vf.index) {
                problems.push(format!("{at}: index {} is configured twice", vf.index));
            }
            if let Some(mac) = vf.mac {
                if mac.is_zero() {
                    problems.push(format!("{at}: mac = \"{mac}\" is the zero address"));
                } else if mac.is_multicast() {
                    problems.push(format!(
                        "{at}: mac = \"{mac}\" is a multicast address (lowest bit of the first octet set)"
                    ));
                } else if let Some(other) = seen_mac.insert(mac, at.clone()) {
                    problems.push(format!("{at}: mac = \"{mac}\" is also given to {other}"));
                }
            }
            if let Some(vlan) = vf.vlan
                && !(1..=4094).contains(&vlan)
            {
                problems.push(format!("{at}: vlan = {vlan} is not in 1..=4094"));
            }
            if let Some(qos) = vf.qos {
                if qos > 7 {
                    problems.push(format!("{at}: qos = {qos} is not in 0..=7"));
                }
                if vf.vlan.is_none() {
                    problems.push(format!(
                        "{at}: qos needs vlan (it is the port VLAN's priority)"
                    ));
                }
            }
            if let Some(id) = &vf.qemu_id {
                if !vf.vfio {
                    problems.push(format!("{at}: qemu_id needs vfio = true"));
                }
                // QEMU's id_wellformed(): a letter, then letters, digits, '-', '.', '_'.
                let ok = id.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
                if !ok {
                    problems.push(format!(
                        "{at}: qemu_id = {id:?} must start with a letter and hold only letters, digits, '-', '.', '_'"
                    ));
                }
            }
            if vf.vfio {
                let id = vf.qemu_device_id();
                if let Some(other) = seen_qemu.insert(id.clone(), at.clone()) {
                    problems.push(format!(
                        "{at}: QEMU device id {id:?} is also used by {other} (set qemu_id)"
                    ));
                }
            }
            if let Some(px) = vf.proxmox {
                if !vf.vfio {
                    problems.push(format!("{at}: proxmox needs vfio = true"));
                }
                if !(100..=999_999_999).contains(&px.vmid) {
                    problems.push(format!(
                        "{at}: proxmox.vmid = {} is not in 100..=999999999",
                        px.vmid
                    ));
                }
                if px.slot > 15 {
                    problems.push(format!(
                        "{at}: proxmox.slot = {} is not in 0..=15 (hostpci0..hostpci15)",
                        px.slot
                    ));
                }
                if let Some(other) = seen_slot.insert((px.vmid, px.slot), at.clone()) {
                    problems.push(format!(
                        "{at}: proxmox VM {} slot hostpci{} is also given to {other}",
                        px.vmid, px.slot
                    ));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError { problems })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct File {
        sriov: Vec<PfConfig>,
    }

    fn parse(text: &str) -> Result<Vec<PfConfig>, String> {
        toml::from_str::<File>(text)
            .map(|f| f.sriov)
            .map_err(|e| e.to_string())
    }

    const FULL: &str = r#"
[[sriov]]
pf = "enp3s0"
numvfs = 2

[[sriov.vf]]
index = 0
mac = "02:00:00:00:53:01"
vlan = 100
qos = 3
spoofchk = true
trust = false
link_state = "enable"
vfio = true
qemu_id = "skua-wan"
proxmox = { vmid = 120, slot = 1 }

[[sriov.vf]]
index = 1

[[sriov]]
pf = "0000:81:00.1"
numvfs = 0
autoprobe = true
"#;

    #[test]
    fn full_example_parses_and_validates() {
        let pfs = parse(FULL).unwrap();
        assert_eq!(pfs.len(), 2);
        assert_eq!(pfs[0].pf, PfRef::Iface("enp3s0".into()));
        assert!(!pfs[0].autoprobe, "autoprobe defaults to false");
        let vf = &pfs[0].vfs[0];
        assert_eq!(vf.mac, Some(MacAddr([2, 0, 0, 0, 0x53, 1])));
        assert_eq!((vf.vlan, vf.qos), (Some(100), Some(3)));
        assert_eq!(vf.link_state, Some(LinkState::Enable));
        assert_eq!(vf.proxmox, Some(ProxmoxTarget { vmid: 120, slot: 1 }));
        let bare = &pfs[0].vfs[1];
        assert_eq!(
            (bare.mac, bare.vlan, bare.spoofchk, bare.trust, bare.vfio),
            (None, None, None, None, false)
        );
        assert_eq!(
            pfs[1].pf,
            PfRef::Pci(PciAddr {
                domain: 0,
                bus: 0x81,
                device: 0,
                function: 1
            })
        );
        assert!(pfs[1].autoprobe);
        validate(&pfs).unwrap();
    }

    #[test]
    fn malformed_values_are_refused_while_reading_with_the_key() {
        for (text, want) in [
            (
                "[[sriov]]\npf = \"eth0\"\nnumvfs = 1\n[[sriov.vf]]\nindex = 0\nmac = \"02:00:00:00:53\"\n",
                "is not a MAC address",
            ),
            (
                "[[sriov]]\npf = \"0000:03:20.0\"\nnumvfs = 1\n",
                "device above 1f",
            ),
            (
                "[[sriov]]\npf = \"a/b\"\nnumvfs = 1\n",
                "not a valid interface name",
            ),
            (
                "[[sriov]]\npf = \"eth0\"\nnumvfs = 1\n[[sriov.vf]]\nindex = 0\nlink_state = \"up\"\n",
                "unknown variant `up`",
            ),
            (
                "[[sriov]]\npf = \"eth0\"\nnumvfs = 1\nspoofchk = true\n",
                "unknown field `spoofchk`",
            ),
            ("[[sriov]]\npf = \"eth0\"\nnumvfs = 70000\n", "numvfs"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    fn one_vf(edit: impl FnOnce(&mut VfConfig)) -> Vec<PfConfig> {
        let mut vf = VfConfig {
            index: 0,
            mac: None,
            vlan: None,
            qos: None,
            spoofchk: None,
            trust: None,
            link_state: None,
            vfio: false,
            qemu_id: None,
            proxmox: None,
        };
        edit(&mut vf);
        vec![PfConfig {
            pf: PfRef::Iface("eth0".into()),
            numvfs: 2,
            autoprobe: false,
            vfs: vec![vf],
        }]
    }

    fn problems(pfs: &[PfConfig]) -> String {
        validate(pfs).unwrap_err().to_string()
    }

    #[test]
    fn validation_names_the_field() {
        let at = "sriov[0].vf[0] (pf = \"eth0\", index = ";
        for (edit, want) in [
            (
                Box::new(|v: &mut VfConfig| v.index = 2) as Box<dyn FnOnce(&mut VfConfig)>,
                "index = 2): index must be below numvfs = 2",
            ),
            (
                Box::new(|v| v.vlan = Some(0)),
                "vlan = 0 is not in 1..=4094",
            ),
            (
                Box::new(|v| v.vlan = Some(4095)),
                "vlan = 4095 is not in 1..=4094",
            ),
            (Box::new(|v| v.qos = Some(1)), "qos needs vlan"),
            (
                Box::new(|v| {
                    v.vlan = Some(5);
                    v.qos = Some(8)
                }),
                "qos = 8 is not in 0..=7",
            ),
            (
                Box::new(|v| v.mac = Some(MacAddr([1, 0, 0, 0, 0, 1]))),
                "mac = \"01:00:00:00:00:01\" is a multicast address",
            ),
            (
                Box::new(|v| v.mac = Some(MacAddr([0; 6]))),
                "is the zero address",
            ),
            (
                Box::new(|v| v.qemu_id = Some("x".into())),
                "qemu_id needs vfio = true",
            ),
            (
                Box::new(|v| {
                    v.vfio = true;
                    v.qemu_id = Some("1vf".into())
                }),
                "qemu_id = \"1vf\" must start with a letter",
            ),
            (
                Box::new(|v| {
                    v.vfio = true;
                    v.proxmox = Some(ProxmoxTarget { vmid: 99, slot: 16 })
                }),
                "proxmox.vmid = 99 is not in 100..=999999999",
            ),
            (
                Box::new(|v| {
                    v.vfio = true;
                    v.proxmox = Some(ProxmoxTarget {
                        vmid: 100,
                        slot: 16,
                    })
                }),
                "proxmox.slot = 16 is not in 0..=15",
            ),
            (
                Box::new(|v| v.proxmox = Some(ProxmoxTarget { vmid: 100, slot: 0 })),
                "proxmox needs vfio = true",
            ),
        ] {
            let text = problems(&one_vf(edit));
            assert!(text.contains(at), "{text}");
            assert!(text.contains(want), "want {want:?} in {text}");
        }
    }

    #[test]
    fn duplicates_are_refused() {
        let mut pfs = one_vf(|v| {
            v.mac = Some(MacAddr([2, 0, 0, 0, 0, 1]));
            v.vfio = true;
            v.proxmox = Some(ProxmoxTarget { vmid: 100, slot: 0 });
        });
        let mut second = pfs[0].vfs[0].clone();
        second.index = 1;
        pfs[0].vfs.push(second.clone());
        second.index = 0;
        pfs[0].vfs.push(second);
        pfs.push(pfs[0].clone());
        let text = problems(&pfs);
        for want in [
            "sriov[1] (pf = \"eth0\"): pf is already configured in sriov[0]",
            "index 0 is configured twice",
            "mac = \"02:00:00:00:00:01\" is also given to sriov[0].vf[0]",
            "QEMU device id \"skua-vf0\" is also used by",
            "proxmox VM 100 slot hostpci0 is also given to",
        ] {
            assert!(text.contains(want), "want {want:?} in {text}");
        }
    }

    #[test]
    fn pci_addresses_round_trip_and_reject_garbage() {
        let a: PciAddr = "0000:03:10.2".parse().unwrap();
        assert_eq!((a.domain, a.bus, a.device, a.function), (0, 3, 0x10, 2));
        assert_eq!(a.to_string(), "0000:03:10.2");
        assert_eq!(
            "3:1f.7".parse::<PciAddr>().unwrap().to_string(),
            "0000:03:1f.7"
        );
        assert_eq!(
            "10000:e1:00.0".parse::<PciAddr>().unwrap().to_string(),
            "10000:e1:00.0"
        );
        for bad in [
            "",
            "0000:03:00",
            "0000:03:00.8",
            "0000:300:00.0",
            "x:03:00.0",
            "0:0:0:0.0",
            "0000:03:.0",
        ] {
            assert!(bad.parse::<PciAddr>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn mac_parsing_is_strict() {
        assert_eq!(
            "02:AB:cd:00:00:ff".parse::<MacAddr>().unwrap().to_string(),
            "02:ab:cd:00:00:ff"
        );
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "2:00:00:00:00:00",
            "02-00-00-00-00-00",
            "0g:00:00:00:00:00",
            "+2:00:00:00:00:00",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad:?} accepted");
        }
    }
}
