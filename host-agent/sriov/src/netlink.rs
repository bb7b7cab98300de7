//! VF attributes through rtnetlink, as `ip link show PF` / `ip link set PF vf N ...` do.
//!
//! Reading: `RTM_GETLINK` for the PF by name with `IFLA_EXT_MASK = RTEXT_FILTER_VF |
//! RTEXT_FILTER_SKIP_STATS` (without the VF filter the kernel leaves `IFLA_VFINFO_LIST` out;
//! without skipping stats the reply grows by about 100 bytes per VF), then `IFLA_NUM_VF` and
//! `IFLA_VFINFO_LIST` → `IFLA_VF_INFO` → `IFLA_VF_MAC`, `IFLA_VF_VLAN` (or the first entry of
//! `IFLA_VF_VLAN_LIST`), `IFLA_VF_SPOOFCHK`, `IFLA_VF_TRUST`, `IFLA_VF_LINK_STATE`.
//!
//! Writing: one `RTM_SETLINK` per attribute, each with `IFLA_VFINFO_LIST` holding one
//! `IFLA_VF_INFO`, so a refusal (net/core/rtnetlink.c `do_setvfinfo` stops at the first
//! attribute a driver refuses) names exactly the attribute the driver refused.
//!
//! Messages are encoded and decoded by `netlink-packet-route` (its `link::sriov` module has
//! every `IFLA_VF_*` attribute), sent on a `netlink-sys` socket. Each call opens its own
//! socket, so [`Rtnetlink`] is `Sync` without a lock and no reply can be mistaken for another
//! call's. The kernel answers `RTM_GETLINK`/`RTM_SETLINK` while the request is being sent
//! (rtnetlink runs in the sender's context), so replies are read without blocking, polling
//! briefly up to a bound, and a missing reply is an error, never a hang.

use std::time::{Duration, Instant};

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_REQUEST, NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{
    LinkAttribute, LinkExtentMask, LinkMessage, LinkVfInfo, VfInfo, VfInfoLinkState, VfInfoMac,
    VfInfoSpoofCheck, VfInfoTrust, VfInfoVlan, VfLinkState, VfVlan,
};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::config::{LinkState, MacAddr};

/// One VF as rtnetlink reports it. `None`: the driver did not report the attribute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VfLinkInfo {
    /// VF index.
    pub vf: u32,
    /// MAC address (00:00:00:00:00:00 when never set, on most drivers).
    pub mac: Option<MacAddr>,
    /// Port VLAN, `None` when untagged (the kernel reports 0).
    pub vlan: Option<u16>,
    /// The port VLAN's 802.1p priority.
    pub qos: u8,
    /// Spoof checking. The kernel reports -1 when the driver does not say; the parser
    /// (netlink-packet-route) reads that as `false`.
    pub spoofchk: Option<bool>,
    /// Trusted VF (same -1 caveat as `spoofchk`).
    pub trust: Option<bool>,
    /// Administrative link state.
    pub link_state: Option<LinkState>,
}

/// One VF attribute to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VfAttr {
    /// `IFLA_VF_MAC`.
    Mac(MacAddr),
    /// `IFLA_VF_VLAN` (802.1Q).
    Vlan {
        /// 1..=4094.
        vlan: u16,
        /// 0..=7.
        qos: u8,
    },
    /// `IFLA_VF_SPOOFCHK`.
    Spoofchk(bool),
    /// `IFLA_VF_TRUST`.
    Trust(bool),
    /// `IFLA_VF_LINK_STATE`.
    LinkState(LinkState),
}

impl VfAttr {
    /// The attribute's name as in the configuration ("mac", "vlan", ...).
    pub fn name(&self) -> &'static str {
        match self {
            VfAttr::Mac(_) => "mac",
            VfAttr::Vlan { .. } => "vlan",
            VfAttr::Spoofchk(_) => "spoofchk",
            VfAttr::Trust(_) => "trust",
            VfAttr::LinkState(_) => "link_state",
        }
    }

    /// The value as `ip link` would print it.
    pub fn value(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" }.to_string();
        match self {
            VfAttr::Mac(m) => m.to_string(),
            VfAttr::Vlan { vlan, qos } => format!("{vlan} qos {qos}"),
            VfAttr::Spoofchk(b) | VfAttr::Trust(b) => on(*b),
            VfAttr::LinkState(s) => s.to_string(),
        }
    }

    fn to_nla(self, vf: u32) -> VfInfo {
        match self {
            VfAttr::Mac(m) => VfInfo::Mac(VfInfoMac::new(vf, &m.0)),
            VfAttr::Vlan { vlan, qos } => {
                VfInfo::Vlan(VfInfoVlan::new(vf, u32::from(vlan), u32::from(qos)))
            }
            VfAttr::Spoofchk(on) => VfInfo::SpoofCheck(VfInfoSpoofCheck::new(vf, on)),
            VfAttr::Trust(on) => VfInfo::Trust(VfInfoTrust::new(vf, on)),
            VfAttr::LinkState(s) => VfInfo::LinkState(VfInfoLinkState::new(
                vf,
                match s {
                    LinkState::Auto => VfLinkState::Auto,
                    LinkState::Enable => VfLinkState::Enable,
                    LinkState::Disable => VfLinkState::Disable,
                },
            )),
        }
    }
}

/// What the planner and applier need from rtnetlink; [`Rtnetlink`] is the kernel's, tests
/// substitute their own.
pub trait VfControl: Send + Sync {
    /// The PF's VFs and their attributes (empty when it has none).
    fn vf_list(&self, ifname: &str) -> Result<Vec<VfLinkInfo>, Error>;
    /// Sets one attribute of VF `vf` of `ifname`.
    fn set_vf(&self, ifname: &str, vf: u16, attr: &VfAttr) -> Result<(), Error>;
}

impl<T: VfControl + ?Sized> VfControl for std::sync::Arc<T> {
    fn vf_list(&self, ifname: &str) -> Result<Vec<VfLinkInfo>, Error> {
        (**self).vf_list(ifname)
    }
    fn set_vf(&self, ifname: &str, vf: u16, attr: &VfAttr) -> Result<(), Error> {
        (**self).set_vf(ifname, vf, attr)
    }
}

/// rtnetlink in the caller's network namespace.
#[derive(Debug, Clone)]
pub struct Rtnetlink {
    timeout: Duration,
}

impl Default for Rtnetlink {
    fn default() -> Self {
        Self::new()
    }
}

impl VfControl for Rtnetlink {
    fn vf_list(&self, ifname: &str) -> Result<Vec<VfLinkInfo>, Error> {
        Ok(self.get(ifname)?.1)
    }

    /// Checks the index against `IFLA_NUM_VF` first, so an interface without VFs gets
    /// [`Error::NoVfs`] rather than the driver's `EOPNOTSUPP`/`EINVAL`.
    fn set_vf(&self, ifname: &str, vf: u16, attr: &VfAttr) -> Result<(), Error> {
        let count = self.num_vfs(ifname)?;
        if count == 0 {
            return Err(Error::NoVfs {
                ifname: ifname.into(),
            });
        }
        if u32::from(vf) >= count {
            return Err(Error::VfOutOfRange {
                ifname: ifname.into(),
                count,
                vf,
            });
        }
        self.send_vf_attr(ifname, vf, attr)
    }
}

impl Rtnetlink {
    /// Replies are awaited at most 2 s (the kernel answers at once; this bounds a wedged
    /// driver holding RTNL).
    pub fn new() -> Self {
        Rtnetlink {
            timeout: Duration::from_secs(2),
        }
    }

    /// `IFLA_NUM_VF` of `ifname` (0 when the kernel does not report it: not a PCI device).
    pub fn num_vfs(&self, ifname: &str) -> Result<u32, Error> {
        Ok(self.get(ifname)?.0)
    }

    /// Sends one `RTM_SETLINK` for `attr` without checking the index first: the kernel's or
    /// the driver's answer, mapped to a message.
    pub fn send_vf_attr(&self, ifname: &str, vf: u16, attr: &VfAttr) -> Result<(), Error> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(ifname.into()));
        msg.attributes
            .push(LinkAttribute::VfInfoList(vec![LinkVfInfo(vec![
                attr.to_nla(u32::from(vf)),
            ])]));
        let replies = self.request(
            RouteNetlinkMessage::SetLink(msg),
            NLM_F_REQUEST | NLM_F_ACK,
            "RTM_SETLINK",
        )?;
        for reply in replies {
            if let NetlinkPayload::Error(e) = reply.payload {
                return match e.code {
                    None => Ok(()),
                    Some(code) => Err(set_error(ifname, vf, attr, -code.get())),
                };
            }
        }
        Err(Error::NetlinkIo {
            what: format!("RTM_SETLINK {ifname}"),
            detail: "the kernel sent no acknowledgement".into(),
        })
    }

    fn get(&self, ifname: &str) -> Result<(u32, Vec<VfLinkInfo>), Error> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(ifname.into()));
        msg.attributes.push(LinkAttribute::ExtMask(vec![
            LinkExtentMask::Vf,
            LinkExtentMask::SkipStats,
        ]));
        let replies = self.request(
            RouteNetlinkMessage::GetLink(msg),
            NLM_F_REQUEST,
            "RTM_GETLINK",
        )?;
        for reply in replies {
            match reply.payload {
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link)) => {
                    return Ok(parse_link(&link));
                }
                NetlinkPayload::Error(e) if e.code.is_some() => {
                    let errno = -e.raw_code();
                    return Err(get_error(ifname, errno));
                }
                _ => {}
            }
        }
        Err(Error::NetlinkIo {
            what: format!("RTM_GETLINK {ifname}"),
            detail: "the kernel sent no link message".into(),
        })
    }

    /// Sends `msg` and returns the replies to it (one datagram: rtnetlink answers a
    /// non-dump request with one message, plus the ACK when asked).
    fn request(
        &self,
        msg: RouteNetlinkMessage,
        flags: u16,
        what: &str,
    ) -> Result<Vec<NetlinkMessage<RouteNetlinkMessage>>, Error> {
        let io = |detail: String| Error::NetlinkIo {
            what: what.into(),
            detail,
        };
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = 1;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        packet.finalize();
        let mut buf = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut buf);

        let mut socket =
            Socket::new(NETLINK_ROUTE).map_err(|e| io(format!("socket(AF_NETLINK): {e}")))?;
        let local = socket.bind_auto().map_err(|e| io(format!("bind: {e}")))?;
        let kernel = SocketAddr::new(0, 0);
        socket
            .send_to(&buf, &kernel, 0)
            .map_err(|e| io(format!("send: {e}")))?;

        let deadline = Instant::now() + self.timeout;
        let datagram = loop {
            // Peek with MSG_TRUNC for the datagram's full size, then read it whole.
            let mut probe: Vec<u8> = Vec::new();
            match socket.recv(
                &mut probe,
                libc::MSG_PEEK | libc::MSG_TRUNC | libc::MSG_DONTWAIT,
            ) {
                Ok(size) => {
                    let mut data: Vec<u8> = Vec::with_capacity(size.max(16));
                    let got = socket
                        .recv(&mut data, libc::MSG_DONTWAIT)
                        .map_err(|e| io(format!("recv: {e}")))?;
                    data.truncate(got);
                    break data;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(io(format!("no reply within {:?}", self.timeout)));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(io(format!("recv: {e}"))),
            }
        };

        let mut out = Vec::new();
        let mut rest = &datagram[..];
        while !rest.is_empty() {
            let len = NetlinkBuffer::new_checked(rest)
                .map_err(|e| io(format!("malformed reply: {e}")))?
                .length() as usize;
            let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rest[..len])
                .map_err(|e| io(format!("malformed reply: {e}")))?;
            if reply.header.sequence_number == 1 && reply.header.port_number == local.port_number()
            {
                out.push(reply);
            }
            // Messages are 4-byte aligned (NLMSG_ALIGN).
            let next = (len + 3) & !3;
            rest = rest.get(next..).unwrap_or(&[]);
        }
        Ok(out)
    }
}

/// `IFLA_NUM_VF` and the VF list of one `RTM_NEWLINK`.
fn parse_link(link: &LinkMessage) -> (u32, Vec<VfLinkInfo>) {
    let mut count = 0;
    let mut vfs = Vec::new();
    for attr in &link.attributes {
        match attr {
            LinkAttribute::NumVf(n) => count = *n,
            LinkAttribute::VfInfoList(list) => {
                vfs = list
                    .iter()
                    .enumerate()
                    .map(|(i, v)| parse_vf(i, v))
                    .collect();
            }
            _ => {}
        }
    }
    (count, vfs)
}

fn parse_vf(position: usize, info: &LinkVfInfo) -> VfLinkInfo {
    let mut out = VfLinkInfo {
        vf: position as u32,
        mac: None,
        vlan: None,
        qos: 0,
        spoofchk: None,
        trust: None,
        link_state: None,
    };
    let mut vlan_seen = false;
    for nla in &info.0 {
        match nla {
            VfInfo::Mac(m) => {
                out.vf = m.vf_id;
                let mut mac = [0u8; 6];
                mac.copy_from_slice(&m.mac[..6]);
                out.mac = Some(MacAddr(mac));
            }
            VfInfo::Vlan(v) => {
                vlan_seen = true;
                out.vlan = u16::try_from(v.vlan_id).ok().filter(|&v| v != 0);
                out.qos = u8::try_from(v.qos).unwrap_or(u8::MAX);
            }
            VfInfo::VlanList(list) if !vlan_seen => {
                if let Some(VfVlan::Info(v)) = list.first() {
                    out.vlan = u16::try_from(v.vlan_id).ok().filter(|&v| v != 0);
                    out.qos = u8::try_from(v.qos).unwrap_or(u8::MAX);
                }
            }
            VfInfo::SpoofCheck(s) => out.spoofchk = Some(s.enabled),
            VfInfo::Trust(t) => out.trust = Some(t.enabled),
            VfInfo::LinkState(l) => {
                out.link_state = match l.state {
                    VfLinkState::Auto => Some(LinkState::Auto),
                    VfLinkState::Enable => Some(LinkState::Enable),
                    VfLinkState::Disable => Some(LinkState::Disable),
                    _ => None,
                }
            }
            _ => {}
        }
    }
    out
}

fn get_error(ifname: &str, errno: i32) -> Error {
    let message = match errno {
        libc::ENODEV => format!("no such network interface {ifname}"),
        _ => format!(
            "reading the VFs of {ifname}: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    };
    Error::Netlink {
        ifname: ifname.into(),
        errno,
        message,
    }
}

/// The kernel's (or the driver's) refusal of one VF attribute, for an operator.
pub(crate) fn set_error(ifname: &str, vf: u16, attr: &VfAttr, errno: i32) -> Error {
    let name = attr.name();
    let value = attr.value();
    let message = match errno {
        // do_setvfinfo: -EOPNOTSUPP when the driver has no ndo_set_vf_<attr>; drivers also
        // return it for attributes their hardware lacks.
        libc::EOPNOTSUPP => format!("driver of {ifname} does not support setting VF {name}"),
        libc::EPERM | libc::EACCES => {
            format!("setting VF {vf} {name} on {ifname} needs CAP_NET_ADMIN")
        }
        libc::ENODEV => format!("no such network interface {ifname}"),
        libc::EINVAL | libc::ERANGE => format!(
            "{ifname} refused VF {vf} {name} {value}: invalid argument for its driver (no such VF, or a \
             value the hardware cannot take)"
        ),
        libc::EBUSY | libc::EAGAIN => format!(
            "{ifname} is busy and did not set VF {vf} {name} {value} (the PF may be resetting; retry)"
        ),
        _ => format!(
            "{ifname}: setting VF {vf} {name} to {value} failed: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    };
    Error::Netlink {
        ifname: ifname.into(),
        errno,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::{Emitable, Parseable};

    #[test]
    fn errno_messages_name_the_driver_and_attribute() {
        let mac = VfAttr::Mac("02:00:00:00:53:01".parse().unwrap());
        assert_eq!(
            set_error("enp3s0", 0, &mac, libc::EOPNOTSUPP).to_string(),
            "driver of enp3s0 does not support setting VF mac"
        );
        assert_eq!(
            set_error("enp3s0", 0, &VfAttr::Trust(true), libc::EOPNOTSUPP).to_string(),
            "driver of enp3s0 does not support setting VF trust"
        );
        let e = set_error(
            "enp3s0",
            3,
            &VfAttr::Vlan { vlan: 100, qos: 9 },
            libc::EINVAL,
        )
        .to_string();
        assert!(
            e.starts_with("enp3s0 refused VF 3 vlan 100 qos 9: invalid argument"),
            "{e}"
        );
        assert_eq!(
            set_error("enp3s0", 1, &VfAttr::Spoofchk(false), libc::EPERM).to_string(),
            "setting VF 1 spoofchk on enp3s0 needs CAP_NET_ADMIN"
        );
        let e = set_error(
            "enp3s0",
            1,
            &VfAttr::LinkState(LinkState::Disable),
            libc::EIO,
        )
        .to_string();
        assert!(
            e.starts_with("enp3s0: setting VF 1 link_state to disable failed: "),
            "{e}"
        );
    }

    /// A PF's RTM_NEWLINK as igb builds it (two VFs, one with a MAC, VLAN and trust), encoded
    /// by the crate and decoded back by our parser.
    #[test]
    fn vf_list_is_parsed_from_a_newlink_message() {
        let mut link = LinkMessage::default();
        link.attributes.push(LinkAttribute::IfName("enp3s0".into()));
        link.attributes.push(LinkAttribute::NumVf(2));
        let vf = |i: u32, mac: [u8; 6], vlan: u32, qos: u32, trust: bool, state: VfLinkState| {
            LinkVfInfo(vec![
                VfInfo::Mac(VfInfoMac::new(i, &mac)),
                VfInfo::Vlan(VfInfoVlan::new(i, vlan, qos)),
                VfInfo::SpoofCheck(VfInfoSpoofCheck::new(i, true)),
                VfInfo::LinkState(VfInfoLinkState::new(i, state)),
                VfInfo::Trust(VfInfoTrust::new(i, trust)),
            ])
        };
        link.attributes.push(LinkAttribute::VfInfoList(vec![
            vf(0, [2, 0, 0, 0, 0x53, 1], 100, 3, true, VfLinkState::Enable),
            vf(1, [0; 6], 0, 0, false, VfLinkState::Auto),
        ]));
        let mut bytes = vec![0u8; link.buffer_len()];
        link.emit(&mut bytes);
        let back = LinkMessage::parse(bytes.as_slice()).unwrap();
        let (count, vfs) = parse_link(&back);
        assert_eq!(count, 2);
        assert_eq!(
            vfs,
            vec![
                VfLinkInfo {
                    vf: 0,
                    mac: Some(MacAddr([2, 0, 0, 0, 0x53, 1])),
                    vlan: Some(100),
                    qos: 3,
                    spoofchk: Some(true),
                    trust: Some(true),
                    link_state: Some(LinkState::Enable),
                },
                VfLinkInfo {
                    vf: 1,
                    mac: Some(MacAddr([0; 6])),
                    vlan: None,
                    qos: 0,
                    spoofchk: Some(true),
                    trust: Some(false),
                    link_state: Some(LinkState::Auto),
                },
            ]
        );
    }

    /// The SETLINK request carries exactly one IFLA_VF_INFO with one attribute, in the
    /// kernel's layout (struct ifla_vf_vlan: vf, vlan, qos as u32).
    #[test]
    fn setlink_encodes_one_attribute() {
        let nla = VfAttr::Vlan { vlan: 100, qos: 5 }.to_nla(3);
        let mut bytes = vec![0u8; nla.buffer_len()];
        nla.emit(&mut bytes);
        // NLA header: length 4 + 12, type IFLA_VF_VLAN (2).
        assert_eq!(&bytes[..4], &[16, 0, 2, 0]);
        assert_eq!(&bytes[4..], &[3, 0, 0, 0, 100, 0, 0, 0, 5, 0, 0, 0]);
    }
}
