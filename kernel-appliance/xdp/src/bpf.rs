//! Loading `skua_xdp` into the kernel, attaching it to an interface and driving its maps.
//!
//! The object is `bpf/skua_xdp.bpf.o`, built from C by `bpf/build.sh` and committed, and
//! embedded here, so building skuad needs no clang. The loader is aya 0.14 (pure Rust, no
//! libbpf): see `docs/xdp.md`, "The XDP program and its loader".
//!
//! How an attachment lives and dies: on kernels with XDP `bpf_link` (5.9+), aya attaches
//! through a link whose only reference is a file descriptor in this process. When the process
//! exits, even by SIGKILL, the kernel closes the fd and the program leaves the interface. An
//! older kernel makes aya fall back to a netlink attachment, which outlives its loader; so does
//! anything attached with `ip link set ... xdp`. [`detach_stale`] removes such a leftover
//! `skua_xdp`, and [`XdpProgram::attach`] does it first, but refuses to touch a program with
//! another name or one held by a live link.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd};

use aya::maps::lpm_trie::{Key as LpmKey, LpmTrie};
use aya::maps::{Array, HashMap, Map, MapData, MapError, PerCpuArray, XskMap};
use aya::programs::links::LinkType;
use aya::programs::xdp::XdpLinkId;
use aya::programs::{
    ProgramError, ProgramFd, TestRun, TestRunAttrs, TestRunOptions, Xdp, XdpMode, loaded_links,
    loaded_programs,
};
use aya::sys::SyscallError;
use aya::{Ebpf, EbpfLoader};

use crate::abi::{
    AclKey, AnswerKey, AnswerValue, CacheRef, CachedValue, Dest, MAP_ACL, MAP_ANSWERS,
    MAP_CACHE_INDEX, MAP_CACHE_SLOTS, MAP_CFG, MAP_DST4, MAP_DST6, MAP_SCRATCH, MAP_STATS,
    MAP_XSKS, MAX_ACL, MAX_ANSWERS, MAX_CACHED, MAX_QUEUES, Stat, XdpConfig, cache_slots,
};

/// The compiled XDP program (`bpf/skua_xdp.bpf.o`), 8-byte aligned as aya's ELF parser wants.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!("../../../bpf/skua_xdp.bpf.o");

/// Name of the program in the object and in the kernel (`bpftool prog`, `ip link`). A program
/// with this name on an interface is taken to be ours.
pub const PROGRAM_NAME: &str = "skua_xdp";

/// `XDP_ABORTED`: program error; the frame is dropped and a tracepoint fires.
pub const XDP_ABORTED: u32 = 0;
/// `XDP_DROP`.
pub const XDP_DROP: u32 = 1;
/// `XDP_PASS`: to the kernel stack.
pub const XDP_PASS: u32 = 2;
/// `XDP_TX`.
pub const XDP_TX: u32 = 3;
/// `XDP_REDIRECT`: here, to the AF_XDP socket of the rx queue.
pub const XDP_REDIRECT: u32 = 4;

/// How [`XdpProgram::attach`] should hook the program in.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub enum AttachMode {
    /// Native, and generic if the driver refuses native.
    #[default]
    Auto,
    /// Native (driver) mode only: runs before any skb exists. Needs driver support.
    Native,
    /// Generic (skb) mode only: works on any interface, after skb allocation.
    Generic,
}

/// The mode an attachment ended up in.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum AttachedMode {
    /// Driver mode; `ip link` shows `xdp`.
    Native,
    /// Skb mode; `ip link` shows `xdpgeneric`.
    Generic,
}

impl AttachedMode {
    const fn xdp_mode(self) -> XdpMode {
        match self {
            Self::Native => XdpMode::Driver,
            Self::Generic => XdpMode::Skb,
        }
    }
}

impl fmt::Display for AttachedMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Native => "native",
            Self::Generic => "generic",
        })
    }
}

/// Errors from loading, attaching and driving the XDP program.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// The interface is already served by this handle.
    #[error("XDP program is already attached to {ifname}")]
    AlreadyAttached {
        /// Interface of the current attachment.
        ifname: String,
    },
    /// Attaching in the one mode asked for failed.
    #[error("XDP attach to {ifname} failed in {mode} mode")]
    Attach {
        /// Interface name.
        ifname: String,
        /// Mode tried.
        mode: AttachedMode,
        /// Why.
        #[source]
        source: Box<ProgramError>,
    },
    /// [`AttachMode::Auto`] failed both ways.
    #[error("XDP attach to {ifname} failed in native and generic mode (native: {native})")]
    AttachAuto {
        /// Interface name.
        ifname: String,
        /// The native-mode error, with its causes.
        native: String,
        /// The generic-mode error.
        #[source]
        source: Box<ProgramError>,
    },
    /// Detaching failed.
    #[error("Couldn't detach the XDP program from {ifname}")]
    Detach {
        /// Interface name.
        ifname: String,
        /// Why.
        #[source]
        source: Box<ProgramError>,
    },
    /// Another program (not `skua_xdp`) is attached; it is not ours to replace.
    #[error("{ifname} already runs XDP program {name:?} (id {id}); refusing to replace it")]
    ForeignProgram {
        /// Interface name.
        ifname: String,
        /// Kernel program id (`bpftool prog show id ID`).
        id: u32,
        /// Its name, empty if unknown.
        name: String,
    },
    /// A `skua_xdp` is attached through a `bpf_link`, so a live process (or a bpffs pin) owns
    /// it: most likely another skuad on the same interface.
    #[error(
        "{ifname} runs skua_xdp (prog id {id}) through bpf_link {link_id}, owned by a live process"
    )]
    HeldByLink {
        /// Interface name.
        ifname: String,
        /// Kernel program id.
        id: u32,
        /// Kernel link id (`bpftool link show id ID`).
        link_id: u32,
    },
    /// The object does not parse or a map cannot be created.
    #[error("Couldn't load the XDP object")]
    Load(#[source] Box<aya::EbpfError>),
    /// The verifier or the kernel rejected the program.
    #[error("Couldn't load {PROGRAM_NAME} into the kernel")]
    LoadProgram(#[source] Box<ProgramError>),
    /// A map access failed.
    #[error("XDP map {map} access failed")]
    Map {
        /// Map name.
        map: &'static str,
        /// Why.
        #[source]
        source: Box<MapError>,
    },
    /// The object lacks a map or the program the ABI names.
    #[error("XDP object has no {0}")]
    MissingObject(&'static str),
    /// A netlink request failed.
    #[error("Netlink request for {ifname} failed{detail}")]
    Netlink {
        /// Interface name.
        ifname: String,
        /// The kernel's extended-ack message, as ": message", or empty.
        detail: String,
        /// The errno.
        #[source]
        source: io::Error,
    },
    /// The program attached to an interface could not be looked up by id (naming a program
    /// this process did not load needs `CAP_SYS_ADMIN`).
    #[error("Couldn't identify XDP program id {id} on {ifname}")]
    Identify {
        /// Interface name.
        ifname: String,
        /// Kernel program id.
        id: u32,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The XSKMAP has no slot for this queue.
    #[error("Queue {queue} is out of range (the XSKMAP has {MAX_QUEUES} entries)")]
    QueueOutOfRange {
        /// Queue index asked for.
        queue: u32,
    },
    /// `BPF_PROG_TEST_RUN` failed.
    #[error("BPF_PROG_TEST_RUN failed")]
    TestRun(#[source] Box<ProgramError>),
    /// No interface by that name.
    #[error("Unknown network interface {0:?}")]
    UnknownInterface(String),
    /// More entries than a map holds.
    #[error("{len} entries for {map}, which holds {max}")]
    TooMany {
        /// The map.
        map: &'static str,
        /// Entries offered.
        len: usize,
        /// Its capacity.
        max: usize,
    },
}

/// The loaded `skua_xdp` program, its maps and at most one attachment.
///
/// Dropping it detaches the program and frees the maps (the kernel frees them once nothing
/// else holds them).
pub struct XdpProgram {
    ebpf: Ebpf,
    attached: Option<Attachment>,
    cached_capacity: u32,
}

struct Attachment {
    ifname: String,
    ifindex: u32,
    mode: AttachedMode,
    link: XdpLinkId,
}

impl XdpProgram {
    /// Loads [`OBJECT`] and its maps into the kernel, without attaching it.
    ///
    /// The config map starts all zero: disabled, everything passes. The answer map holds
    /// up to [`MAX_ANSWERS`] entries; see [`XdpProgram::load_with_capacity`].
    pub fn load() -> Result<Self, XdpError> {
        Self::load_with_capacity(MAX_ANSWERS)
    }

    /// [`XdpProgram::load`] with room for `answers` precompiled answers (at least 1: the
    /// kernel refuses empty maps). Entries are allocated as inserted, not up front.
    pub fn load_with_capacity(answers: u32) -> Result<Self, XdpError> {
        Self::load_object(OBJECT, answers)
    }

    /// [`XdpProgram::load_with_capacity`] from another build of the object (a variant under
    /// measurement); it must have the same program and map names.
    pub fn load_object(object: &[u8], answers: u32) -> Result<Self, XdpError> {
        Self::load_object_with(object, answers, MAX_CACHED)
    }

    /// [`XdpProgram::load_object`] with room for `cached` cached answers too (at least 1;
    /// their slots, [`cache_slots`]`(cached)` of [`CachedValue`] size, are allocated up
    /// front: about 850 bytes per entry).
    pub fn load_object_with(object: &[u8], answers: u32, cached: u32) -> Result<Self, XdpError> {
        let cached = cached.max(1);
        let mut ebpf = EbpfLoader::new()
            .map_max_entries(MAP_ANSWERS, answers.max(1))
            .map_max_entries(MAP_CACHE_INDEX, cached)
            .map_max_entries(MAP_CACHE_SLOTS, cache_slots(cached))
            .load(object)
            .map_err(|e| XdpError::Load(Box::new(e)))?;
        for map in [
            MAP_XSKS,
            MAP_CFG,
            MAP_DST4,
            MAP_DST6,
            MAP_STATS,
            MAP_ANSWERS,
            MAP_ACL,
            MAP_SCRATCH,
            MAP_CACHE_INDEX,
            MAP_CACHE_SLOTS,
        ] {
            if ebpf.map(map).is_none() {
                return Err(XdpError::MissingObject(map));
            }
        }
        let program: &mut Xdp = ebpf
            .program_mut(PROGRAM_NAME)
            .ok_or(XdpError::MissingObject(PROGRAM_NAME))?
            .try_into()
            .map_err(load_err)?;
        program.load().map_err(load_err)?;
        Ok(Self {
            ebpf,
            attached: None,
            cached_capacity: cached,
        })
    }

    /// Attaches the program to `ifname`.
    ///
    /// A `skua_xdp` left there by an earlier instance is removed first ([`detach_stale`]);
    /// any other program makes this fail with [`XdpError::ForeignProgram`], and the kernel
    /// itself refuses to replace a program held by a link. Logs the mode chosen.
    pub fn attach(&mut self, ifname: &str, mode: AttachMode) -> Result<AttachedMode, XdpError> {
        if let Some(a) = &self.attached {
            return Err(XdpError::AlreadyAttached {
                ifname: a.ifname.clone(),
            });
        }
        let ifindex = ifindex(ifname)?;
        match clear_stale(ifname, ifindex)? {
            Occupant::None | Occupant::StaleRemoved => {}
            Occupant::Foreign { id, name } => {
                return Err(XdpError::ForeignProgram {
                    ifname: ifname.to_owned(),
                    id,
                    name,
                });
            }
        }
        let program = self.program_mut()?;
        let try_mode = |program: &mut Xdp, mode: AttachedMode| {
            program.attach_to_if_index(ifindex, mode.xdp_mode())
        };
        let mut fallback = String::new();
        let (link, chosen) = match mode {
            AttachMode::Native | AttachMode::Generic => {
                let mode = if mode == AttachMode::Native {
                    AttachedMode::Native
                } else {
                    AttachedMode::Generic
                };
                let link = try_mode(program, mode).map_err(|e| XdpError::Attach {
                    ifname: ifname.to_owned(),
                    mode,
                    source: Box::new(e),
                })?;
                (link, mode)
            }
            AttachMode::Auto => match try_mode(program, AttachedMode::Native) {
                Ok(link) => (link, AttachedMode::Native),
                Err(native) => match try_mode(program, AttachedMode::Generic) {
                    Ok(link) => {
                        fallback = format!(" (native failed: {})", error_chain(&native));
                        (link, AttachedMode::Generic)
                    }
                    Err(generic) => {
                        return Err(XdpError::AttachAuto {
                            ifname: ifname.to_owned(),
                            native: error_chain(&native),
                            source: Box::new(generic),
                        });
                    }
                },
            },
        };
        log::info!(
            "{PROGRAM_NAME}: attached to {ifname} (ifindex {ifindex}) in {chosen} mode{fallback}"
        );
        self.attached = Some(Attachment {
            ifname: ifname.to_owned(),
            ifindex,
            mode: chosen,
            link,
        });
        Ok(chosen)
    }

    /// Detaches the program from its interface; a no-op when not attached. Also done on drop.
    pub fn detach(&mut self) -> Result<(), XdpError> {
        let Some(a) = self.attached.take() else {
            return Ok(());
        };
        self.program_mut()?
            .detach(a.link)
            .map_err(|e| XdpError::Detach {
                ifname: a.ifname,
                source: Box::new(e),
            })
    }

    /// The mode of the current attachment, if any.
    pub fn attached_mode(&self) -> Option<AttachedMode> {
        self.attached.as_ref().map(|a| a.mode)
    }

    /// The interface index of the current attachment, if any.
    pub fn ifindex(&self) -> Option<u32> {
        self.attached.as_ref().map(|a| a.ifindex)
    }

    /// The kernel's id for the loaded program (`bpftool prog show id ID`).
    pub fn program_id(&self) -> Result<u32, XdpError> {
        let info = self.program()?.info().map_err(load_err)?;
        Ok(info.id())
    }

    /// Replaces the config record (port, flags). Takes effect for the next frame.
    pub fn set_config(&mut self, cfg: XdpConfig) -> Result<(), XdpError> {
        let mut map: Array<&mut MapData, XdpConfig> =
            Array::try_from(self.map_mut(MAP_CFG)?).map_err(map_err(MAP_CFG))?;
        map.set(0, cfg, 0).map_err(map_err(MAP_CFG))
    }

    /// Adds a destination address that is ours. IPv4-mapped IPv6 addresses are stored as
    /// IPv4, since that is how such packets arrive.
    pub fn add_dest(&mut self, ip: IpAddr) -> Result<(), XdpError> {
        self.set_dest(ip, Dest::default())
    }

    /// Adds or updates a destination with its value: a service address carries its lease
    /// expiry (`Dest::lease_until_ns` on the kernel's monotonic clock), renewed in place.
    pub fn set_dest(&mut self, ip: IpAddr, dest: Dest) -> Result<(), XdpError> {
        match ip.to_canonical() {
            IpAddr::V4(v4) => {
                let mut map: HashMap<&mut MapData, u32, Dest> =
                    HashMap::try_from(self.map_mut(MAP_DST4)?).map_err(map_err(MAP_DST4))?;
                // The program compares against iphdr.daddr as stored: network byte order.
                map.insert(u32::from_ne_bytes(v4.octets()), dest, 0)
                    .map_err(map_err(MAP_DST4))
            }
            IpAddr::V6(v6) => {
                let mut map: HashMap<&mut MapData, [u8; 16], Dest> =
                    HashMap::try_from(self.map_mut(MAP_DST6)?).map_err(map_err(MAP_DST6))?;
                map.insert(v6.octets(), dest, 0).map_err(map_err(MAP_DST6))
            }
        }
    }

    /// Removes a destination address; absent addresses are not an error.
    pub fn remove_dest(&mut self, ip: IpAddr) -> Result<(), XdpError> {
        let (map, result) = match ip.to_canonical() {
            IpAddr::V4(v4) => {
                let mut map: HashMap<&mut MapData, u32, Dest> =
                    HashMap::try_from(self.map_mut(MAP_DST4)?).map_err(map_err(MAP_DST4))?;
                (MAP_DST4, map.remove(&u32::from_ne_bytes(v4.octets())))
            }
            IpAddr::V6(v6) => {
                let mut map: HashMap<&mut MapData, [u8; 16], Dest> =
                    HashMap::try_from(self.map_mut(MAP_DST6)?).map_err(map_err(MAP_DST6))?;
                (MAP_DST6, map.remove(&v6.octets()))
            }
        };
        match result {
            Err(e) if !is_not_found(&e) => Err(map_err(map)(e)),
            _ => Ok(()),
        }
    }

    /// Replaces the access-control trie: (prefix, 1 = may get answers in the program).
    pub fn set_acl(&mut self, rules: &[(AclKey, u8)]) -> Result<(), XdpError> {
        if rules.len() > MAX_ACL as usize {
            return Err(XdpError::TooMany {
                map: MAP_ACL,
                len: rules.len(),
                max: MAX_ACL as usize,
            });
        }
        let mut map: LpmTrie<&mut MapData, [u8; 16], u8> =
            LpmTrie::try_from(self.map_mut(MAP_ACL)?).map_err(map_err(MAP_ACL))?;
        let old: Vec<LpmKey<[u8; 16]>> = map.keys().filter_map(Result::ok).collect();
        for k in &old {
            match map.remove(k) {
                Err(e) if !is_not_found(&e) => return Err(map_err(MAP_ACL)(e)),
                _ => {}
            }
        }
        for (k, v) in rules {
            map.insert(&LpmKey::new(k.prefixlen, k.addr), v, 0)
                .map_err(map_err(MAP_ACL))?;
        }
        Ok(())
    }

    /// Replaces every precompiled answer. Clear [`crate::abi::F_ANSWER`] first (the map is
    /// rewritten entry by entry), set it again after.
    pub fn set_answers(&mut self, answers: &[(AnswerKey, AnswerValue)]) -> Result<(), XdpError> {
        let mut map: HashMap<&mut MapData, AnswerKey, AnswerValue> =
            HashMap::try_from(self.map_mut(MAP_ANSWERS)?).map_err(map_err(MAP_ANSWERS))?;
        let keep: std::collections::HashSet<&AnswerKey> = answers.iter().map(|(k, _)| k).collect();
        let old: Vec<AnswerKey> = map.keys().filter_map(Result::ok).collect();
        for k in old.iter().filter(|k| !keep.contains(k)) {
            match map.remove(k) {
                Err(e) if !is_not_found(&e) => return Err(map_err(MAP_ANSWERS)(e)),
                _ => {}
            }
        }
        for (k, v) in answers {
            map.insert(k, v, 0).map_err(map_err(MAP_ANSWERS))?;
        }
        Ok(())
    }

    /// How many cached answers the index holds at most; slots are
    /// [`cache_slots`]`(this)`, numbered from 0.
    pub fn cached_capacity(&self) -> u32 {
        self.cached_capacity
    }

    /// Writes a cached answer's recipe into `slot`. The slot must not be referenced from
    /// the index (nor have been in the last seconds: a program run may still read it).
    pub fn set_cache_slot(&mut self, slot: u32, value: &CachedValue) -> Result<(), XdpError> {
        let mut map: Array<&mut MapData, CachedValue> =
            Array::try_from(self.map_mut(MAP_CACHE_SLOTS)?).map_err(map_err(MAP_CACHE_SLOTS))?;
        map.set(slot, value, 0).map_err(map_err(MAP_CACHE_SLOTS))
    }

    /// Points `key` at `slot` (the slot written first): the program answers from it at once
    /// (with [`crate::abi::F_CACHE`] set).
    pub fn set_cache_ref(&mut self, key: &AnswerKey, slot: u32) -> Result<(), XdpError> {
        let mut map: HashMap<&mut MapData, AnswerKey, CacheRef> =
            HashMap::try_from(self.map_mut(MAP_CACHE_INDEX)?).map_err(map_err(MAP_CACHE_INDEX))?;
        map.insert(key, CacheRef { slot }, 0)
            .map_err(map_err(MAP_CACHE_INDEX))
    }

    /// Stops answering `key` from the cache (no error when it was not there).
    pub fn remove_cache_ref(&mut self, key: &AnswerKey) -> Result<(), XdpError> {
        let mut map: HashMap<&mut MapData, AnswerKey, CacheRef> =
            HashMap::try_from(self.map_mut(MAP_CACHE_INDEX)?).map_err(map_err(MAP_CACHE_INDEX))?;
        match map.remove(key) {
            Err(e) if !is_not_found(&e) => Err(map_err(MAP_CACHE_INDEX)(e)),
            _ => Ok(()),
        }
    }

    /// The index: every cached key and its slot.
    pub fn cache_refs(&self) -> Result<Vec<(AnswerKey, u32)>, XdpError> {
        let map: HashMap<&MapData, AnswerKey, CacheRef> =
            HashMap::try_from(self.map(MAP_CACHE_INDEX)?).map_err(map_err(MAP_CACHE_INDEX))?;
        Ok(map
            .iter()
            .filter_map(Result::ok)
            .map(|(k, r)| (k, r.slot))
            .collect())
    }

    /// Number of precompiled answers in the map.
    pub fn answer_count(&self) -> Result<usize, XdpError> {
        let map: HashMap<&MapData, AnswerKey, AnswerValue> =
            HashMap::try_from(self.map(MAP_ANSWERS)?).map_err(map_err(MAP_ANSWERS))?;
        Ok(map.keys().filter_map(Result::ok).count())
    }

    /// Puts the AF_XDP socket serving rx queue `queue` into the XSKMAP.
    ///
    /// The map does not keep the socket alive: when its last fd closes, the kernel removes
    /// the entry and that queue's frames pass to the kernel again. The kernel does not check
    /// the binding here; bind the socket to this interface and `queue` first, since a frame
    /// redirected to a socket bound elsewhere is dropped (`xsk_rcv_check`).
    pub fn set_socket(&mut self, queue: u32, fd: BorrowedFd<'_>) -> Result<(), XdpError> {
        if queue >= MAX_QUEUES {
            return Err(XdpError::QueueOutOfRange { queue });
        }
        let mut map: XskMap<&mut MapData> =
            XskMap::try_from(self.map_mut(MAP_XSKS)?).map_err(map_err(MAP_XSKS))?;
        map.set(queue, fd, 0).map_err(map_err(MAP_XSKS))
    }

    /// Empties the XSKMAP slot of `queue`; frames on that queue then pass to the kernel.
    pub fn clear_socket(&mut self, queue: u32) -> Result<(), XdpError> {
        if queue >= MAX_QUEUES {
            return Err(XdpError::QueueOutOfRange { queue });
        }
        let mut map: XskMap<&mut MapData> =
            XskMap::try_from(self.map_mut(MAP_XSKS)?).map_err(map_err(MAP_XSKS))?;
        match map.unset(queue) {
            Err(e) if !is_not_found(&e) => Err(map_err(MAP_XSKS)(e)),
            _ => Ok(()),
        }
    }

    /// The counters, summed over CPUs, indexed by [`Stat::index`].
    pub fn stats(&self) -> Result<[u64; Stat::COUNT], XdpError> {
        let map: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.map(MAP_STATS)?).map_err(map_err(MAP_STATS))?;
        let mut out = [0u64; Stat::COUNT];
        for stat in Stat::ALL {
            let per_cpu = map.get(&(stat as u32), 0).map_err(map_err(MAP_STATS))?;
            out[stat.index()] = per_cpu.iter().fold(0u64, |sum, v| sum.wrapping_add(*v));
        }
        Ok(out)
    }

    /// Runs the program once on `frame` with `BPF_PROG_TEST_RUN` (rx queue 0) and returns
    /// its XDP action. Counters move as for a real frame. A redirect to an empty XSKMAP slot
    /// reports [`XDP_PASS`] (the fallback action), to an occupied one [`XDP_REDIRECT`]; the
    /// kernel does not deliver test frames anywhere.
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, XdpError> {
        self.test_run_output(frame).map(|(action, _)| action)
    }

    /// [`XdpProgram::test_run`], also returning the frame as the program left it (the
    /// reply, after `XDP_TX`).
    pub fn test_run_output(&self, frame: &[u8]) -> Result<(u32, Vec<u8>), XdpError> {
        // Room for the frame and any growth the program can make.
        let mut out = vec![0u8; frame.len() + 4096];
        let opts = TestRunOptions {
            data_in: Some(frame),
            data_out: Some(&mut out),
            ..TestRunOptions::new()
        };
        let result = self
            .program()?
            .test_run(opts)
            .map_err(|e| XdpError::TestRun(Box::new(e)))?;
        out.truncate(result.data_size_out as usize);
        Ok((result.return_value, out))
    }

    /// Runs the program `repeat` times on `frame` in the kernel and returns its action and
    /// the mean time per run as the kernel measured it (`BPF_PROG_TEST_RUN` with `repeat`):
    /// the program's own cost, without the driver's.
    pub fn time_run(
        &self,
        frame: &[u8],
        repeat: u32,
    ) -> Result<(u32, std::time::Duration), XdpError> {
        let opts = TestRunOptions {
            data_in: Some(frame),
            repeat: repeat.max(1),
            ..TestRunOptions::new()
        };
        let result = self
            .program()?
            .test_run(opts)
            .map_err(|e| XdpError::TestRun(Box::new(e)))?;
        Ok((result.return_value, result.duration))
    }

    /// Feeds `frame` to the program as if it had arrived on interface `ifindex`, and carries
    /// out the verdict for real: a redirect lands in an AF_XDP socket, a pass goes up the
    /// kernel stack (`BPF_PROG_TEST_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`, kernel 5.18+).
    /// For self-tests: it proves the whole path from the program to the socket without a
    /// packet on the wire. The interface is looked up in the calling thread's network
    /// namespace. `queue` must exist on it (else `EINVAL`), but the frame is always seen as
    /// rx queue 0's: live-frame mode builds its own rx queue info with index 0
    /// (net/bpf/test_run.c, `xdp_test_run_setup`), so only queue 0's socket can be reached.
    /// The program's action is not reported in this mode; the counters are.
    pub fn inject(&self, frame: &[u8], ifindex: u32, queue: u32) -> Result<(), XdpError> {
        // Larger frames cannot exist; the kernel would refuse the mismatch anyway.
        let data_end = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex. The kernel wants data = 0 and data_end = the frame length.
        let md = [0, data_end, 0, ifindex, queue, 0];
        let mut ctx = [0u8; 24];
        for (chunk, v) in ctx.chunks_exact_mut(4).zip(md) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        let opts = TestRunOptions {
            data_in: Some(frame),
            ctx_in: Some(&ctx),
            attrs: TestRunAttrs::new().xdp_live_frames(0),
            ..TestRunOptions::new()
        };
        self.program()?
            .test_run(opts)
            .map_err(|e| XdpError::TestRun(Box::new(e)))?;
        Ok(())
    }

    fn program(&self) -> Result<&Xdp, XdpError> {
        self.ebpf
            .program(PROGRAM_NAME)
            .ok_or(XdpError::MissingObject(PROGRAM_NAME))?
            .try_into()
            .map_err(load_err)
    }

    fn program_mut(&mut self) -> Result<&mut Xdp, XdpError> {
        self.ebpf
            .program_mut(PROGRAM_NAME)
            .ok_or(XdpError::MissingObject(PROGRAM_NAME))?
            .try_into()
            .map_err(load_err)
    }

    fn map(&self, name: &'static str) -> Result<&Map, XdpError> {
        self.ebpf.map(name).ok_or(XdpError::MissingObject(name))
    }

    fn map_mut(&mut self, name: &'static str) -> Result<&mut Map, XdpError> {
        self.ebpf.map_mut(name).ok_or(XdpError::MissingObject(name))
    }
}

impl fmt::Debug for XdpProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("XdpProgram");
        if let Some(a) = &self.attached {
            d.field("ifname", &a.ifname)
                .field("ifindex", &a.ifindex)
                .field("mode", &a.mode);
        }
        d.finish_non_exhaustive()
    }
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        if let Err(e) = self.detach() {
            log::warn!("{PROGRAM_NAME}: {}", error_chain(&e));
        }
    }
}

/// The XDP program attached to `ifname` now, as `(program id, program name)`; `None` if
/// there is none. With programs in several modes (possible only with hardware offload), the
/// driver-mode one is reported.
pub fn current_program(ifname: &str) -> Result<Option<(u32, String)>, XdpError> {
    let ifindex = ifindex(ifname)?;
    let attached = netlink::xdp_programs(ifindex).map_err(|e| e.into_xdp_error(ifname))?;
    let Some(&(_, id)) = attached.first() else {
        return Ok(None);
    };
    let name = program_by_id(ifname, id)?
        .map(|(name, _)| name)
        .unwrap_or_default();
    Ok(Some((id, name)))
}

/// Detaches a `skua_xdp` left on `ifname` by an instance that did not clean up.
///
/// Returns `true` if one was removed, `false` if the interface has no XDP program or a
/// program with another name (left alone). Only netlink attachments can be left behind (see
/// the module docs); a `skua_xdp` held by a `bpf_link` belongs to a live process and gives
/// [`XdpError::HeldByLink`]. The detach is a compare-and-swap on the program
/// (`XDP_FLAGS_REPLACE`), so a program attached meanwhile by someone else is never removed.
pub fn detach_stale(ifname: &str) -> Result<bool, XdpError> {
    let ifindex = ifindex(ifname)?;
    Ok(clear_stale(ifname, ifindex)? == Occupant::StaleRemoved)
}

#[derive(Debug, Eq, PartialEq)]
enum Occupant {
    None,
    StaleRemoved,
    Foreign { id: u32, name: String },
}

fn clear_stale(ifname: &str, ifindex: u32) -> Result<Occupant, XdpError> {
    let attached = netlink::xdp_programs(ifindex).map_err(|e| e.into_xdp_error(ifname))?;
    let mut occupant = Occupant::None;
    for (mode, id) in attached {
        let Some((name, fd)) = program_by_id(ifname, id)? else {
            // Gone since the netlink answer: nothing to do.
            continue;
        };
        if name != PROGRAM_NAME {
            return Ok(Occupant::Foreign { id, name });
        }
        if let Some(link_id) = xdp_link_of(id)? {
            return Err(XdpError::HeldByLink {
                ifname: ifname.to_owned(),
                id,
                link_id,
            });
        }
        netlink::detach_expected(ifindex, mode, fd.as_fd())
            .map_err(|e| e.into_xdp_error(ifname))?;
        log::info!("{PROGRAM_NAME}: removed stale program id {id} from {ifname}");
        occupant = Occupant::StaleRemoved;
    }
    Ok(occupant)
}

/// Name and an fd of the loaded program with this id, `None` if it no longer exists.
///
/// aya has no lookup by id, so this walks the kernel's program list (`BPF_PROG_GET_NEXT_ID`,
/// which, like `BPF_PROG_GET_FD_BY_ID`, needs `CAP_SYS_ADMIN`).
fn program_by_id(ifname: &str, id: u32) -> Result<Option<(String, ProgramFd)>, XdpError> {
    let mut last_err = None;
    for info in loaded_programs() {
        match info {
            Ok(info) if info.id() == id => {
                let name = info.name_as_str().unwrap_or_default().to_owned();
                return match info.fd() {
                    Ok(fd) => Ok(Some((name, fd))),
                    // Unloaded between listing and opening.
                    Err(_) => Ok(None),
                };
            }
            Ok(_) => {}
            // Programs can vanish while we walk the list; remember, keep going.
            Err(e) => last_err = Some(e),
        }
    }
    match last_err {
        Some(e) => Err(XdpError::Identify {
            ifname: ifname.to_owned(),
            id,
            source: match e {
                ProgramError::SyscallError(SyscallError { io_error, .. }) => io_error,
                other => io::Error::other(error_chain(&other)),
            },
        }),
        None => Ok(None),
    }
}

/// Id of an XDP `bpf_link` running program `prog_id`, if any.
fn xdp_link_of(prog_id: u32) -> Result<Option<u32>, XdpError> {
    for info in loaded_links() {
        // A link that vanished while listing cannot be the one we look for.
        let Ok(info) = info else { continue };
        if info.program_id() == prog_id && matches!(info.link_type(), Ok(LinkType::Xdp)) {
            return Ok(Some(info.id()));
        }
    }
    Ok(None)
}

fn ifindex(ifname: &str) -> Result<u32, XdpError> {
    let unknown = || XdpError::UnknownInterface(ifname.to_owned());
    let name = CString::new(ifname).map_err(|_| unknown())?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call; the function
    // only reads it.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        Err(unknown())
    } else {
        Ok(index)
    }
}

fn map_err(map: &'static str) -> impl Fn(MapError) -> XdpError {
    move |e| XdpError::Map {
        map,
        source: Box::new(e),
    }
}

/// A delete of a key that is not there (aya reports the raw `ENOENT`).
fn is_not_found(e: &MapError) -> bool {
    match e {
        MapError::KeyNotFound | MapError::ElementNotFound => true,
        MapError::SyscallError(SyscallError { io_error, .. }) => {
            io_error.raw_os_error() == Some(libc::ENOENT)
        }
        _ => false,
    }
}

fn load_err(e: ProgramError) -> XdpError {
    XdpError::LoadProgram(Box::new(e))
}

/// `e: cause: cause`, for errors that end up inside another error's message.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// The two rtnetlink requests aya does not expose: read `IFLA_XDP`, and detach a given
/// program (compare-and-swap) regardless of who attached it.
mod netlink {
    use std::io;
    use std::mem::size_of;
    use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

    use super::XdpError;

    // linux/netlink.h, linux/rtnetlink.h, linux/if_link.h (UAPI, stable numbers).
    const NETLINK_ROUTE: libc::c_int = 0;
    const SOL_NETLINK: libc::c_int = 270;
    const NETLINK_CAP_ACK: libc::c_int = 10;
    const NETLINK_EXT_ACK: libc::c_int = 11;
    const NLMSG_HDRLEN: usize = 16;
    const NLMSG_ERROR: u16 = 2;
    const NLM_F_REQUEST: u16 = 0x01;
    const NLM_F_ACK: u16 = 0x04;
    const NLM_F_CAPPED: u16 = 0x100;
    const NLM_F_ACK_TLVS: u16 = 0x200;
    const NLMSGERR_ATTR_MSG: u16 = 1;
    const RTM_NEWLINK: u16 = 16;
    const RTM_GETLINK: u16 = 18;
    const RTM_SETLINK: u16 = 19;
    const IFINFOMSG_LEN: usize = 16;
    const NLA_F_NESTED: u16 = 1 << 15;
    const IFLA_XDP: u16 = 43;
    const IFLA_XDP_FD: u16 = 1;
    const IFLA_XDP_FLAGS: u16 = 3;
    const IFLA_XDP_DRV_PROG_ID: u16 = 5;
    const IFLA_XDP_SKB_PROG_ID: u16 = 6;
    const IFLA_XDP_HW_PROG_ID: u16 = 7;
    const IFLA_XDP_EXPECTED_FD: u16 = 8;
    const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
    const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
    const XDP_FLAGS_HW_MODE: u32 = 1 << 3;
    const XDP_FLAGS_REPLACE: u32 = 1 << 4;

    /// Where a program is attached: the `XDP_FLAGS_*_MODE` bit.
    #[derive(Clone, Copy, Debug, Eq, PartialEq)]
    pub(super) struct ModeFlag(u32);

    /// A failed request: errno plus the kernel's extended-ack text, if it sent one.
    #[derive(Debug)]
    pub(super) struct NlError {
        errno: io::Error,
        extack: Option<String>,
    }

    impl NlError {
        pub(super) fn into_xdp_error(self, ifname: &str) -> XdpError {
            XdpError::Netlink {
                ifname: ifname.to_owned(),
                detail: self.extack.map(|m| format!(": {m}")).unwrap_or_default(),
                source: self.errno,
            }
        }
    }

    impl From<io::Error> for NlError {
        fn from(errno: io::Error) -> Self {
            Self {
                errno,
                extack: None,
            }
        }
    }

    /// Programs attached to `ifindex`, driver mode first, as `(mode, program id)`.
    pub(super) fn xdp_programs(ifindex: u32) -> Result<Vec<(ModeFlag, u32)>, NlError> {
        let mut msg = Message::new(RTM_GETLINK, ifindex);
        let replies = Socket::open()?.request(msg.finish())?;
        let mut out = Vec::new();
        for reply in replies {
            let Some(attrs) = reply.get(NLMSG_HDRLEN + IFINFOMSG_LEN..) else {
                continue;
            };
            let Some(xdp) = attrs_of(attrs)
                .find(|(t, _)| *t == IFLA_XDP)
                .map(|(_, v)| v)
            else {
                continue;
            };
            for (t, v) in attrs_of(xdp) {
                let mode = match t {
                    IFLA_XDP_DRV_PROG_ID => XDP_FLAGS_DRV_MODE,
                    IFLA_XDP_SKB_PROG_ID => XDP_FLAGS_SKB_MODE,
                    IFLA_XDP_HW_PROG_ID => XDP_FLAGS_HW_MODE,
                    _ => continue,
                };
                if let Some(id) = v
                    .get(..4)
                    .and_then(|b| b.try_into().ok())
                    .map(u32::from_ne_bytes)
                    && id != 0
                {
                    out.push((ModeFlag(mode), id));
                }
            }
        }
        out.sort_by_key(|(m, _)| match m.0 {
            XDP_FLAGS_DRV_MODE => 0,
            XDP_FLAGS_SKB_MODE => 1,
            _ => 2,
        });
        Ok(out)
    }

    /// Detaches the program in `mode` from `ifindex` only if it is still `expected`
    /// (`XDP_FLAGS_REPLACE` + `IFLA_XDP_EXPECTED_FD`, kernel 5.7+). The kernel refuses with
    /// `EBUSY` if a `bpf_link` holds it and `EEXIST` if another program took its place.
    pub(super) fn detach_expected(
        ifindex: u32,
        mode: ModeFlag,
        expected: BorrowedFd<'_>,
    ) -> Result<(), NlError> {
        let mut msg = Message::new(RTM_SETLINK, ifindex);
        let nest = msg.begin_nested(IFLA_XDP);
        msg.attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes());
        msg.attr(IFLA_XDP_FLAGS, &(mode.0 | XDP_FLAGS_REPLACE).to_ne_bytes());
        msg.attr(IFLA_XDP_EXPECTED_FD, &expected.as_raw_fd().to_ne_bytes());
        msg.end_nested(nest);
        Socket::open()?.request(msg.finish())?;
        Ok(())
    }

    /// An rtnetlink request: `nlmsghdr`, `ifinfomsg`, attributes (each 4-byte aligned).
    struct Message(Vec<u8>);

    impl Message {
        fn new(kind: u16, ifindex: u32) -> Self {
            let mut b = Vec::with_capacity(128);
            b.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_len, set by finish()
            b.extend_from_slice(&kind.to_ne_bytes());
            b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
            b.extend_from_slice(&1u32.to_ne_bytes()); // nlmsg_seq
            b.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: the kernel fills it in
            // ifinfomsg: family AF_UNSPEC, pad, type, index, flags, change.
            b.extend_from_slice(&[0, 0, 0, 0]);
            b.extend_from_slice(&ifindex.to_ne_bytes());
            b.extend_from_slice(&[0; 8]);
            Self(b)
        }

        fn attr(&mut self, kind: u16, value: &[u8]) {
            let len = u16::try_from(4 + value.len()).expect("netlink attribute fits in u16");
            self.0.extend_from_slice(&len.to_ne_bytes());
            self.0.extend_from_slice(&kind.to_ne_bytes());
            self.0.extend_from_slice(value);
            self.0.resize(self.0.len().next_multiple_of(4), 0);
        }

        fn begin_nested(&mut self, kind: u16) -> usize {
            let at = self.0.len();
            self.attr(kind | NLA_F_NESTED, &[]);
            at
        }

        fn end_nested(&mut self, at: usize) {
            let len = u16::try_from(self.0.len() - at).expect("netlink attribute fits in u16");
            self.0[at..at + 2].copy_from_slice(&len.to_ne_bytes());
        }

        fn finish(&mut self) -> &[u8] {
            let len = u32::try_from(self.0.len()).expect("netlink message fits in u32");
            self.0[..4].copy_from_slice(&len.to_ne_bytes());
            &self.0
        }
    }

    struct Socket(OwnedFd);

    impl Socket {
        fn open() -> io::Result<Self> {
            // SAFETY: plain syscall with constant arguments; the result is checked.
            let fd = unsafe {
                libc::socket(
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    NETLINK_ROUTE,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
            let sock = Self(unsafe { OwnedFd::from_raw_fd(fd) });
            // Best effort: error strings ("Can't replace active BPF XDP link") and short
            // acks; older kernels without them still answer.
            sock.set_int(SOL_NETLINK, NETLINK_EXT_ACK, 1).ok();
            sock.set_int(SOL_NETLINK, NETLINK_CAP_ACK, 1).ok();
            // A bounded wait: the kernel answers rtnetlink synchronously, so a timeout
            // means something is badly wrong, not slow.
            let timeout = libc::timeval {
                tv_sec: 5,
                tv_usec: 0,
            };
            sock.set_opt(libc::SOL_SOCKET, libc::SO_RCVTIMEO, &timeout)?;
            Ok(sock)
        }

        fn set_int(
            &self,
            level: libc::c_int,
            name: libc::c_int,
            value: libc::c_int,
        ) -> io::Result<()> {
            self.set_opt(level, name, &value)
        }

        fn set_opt<T>(&self, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
            let len = libc::socklen_t::try_from(size_of::<T>()).expect("option fits in socklen_t");
            // SAFETY: `value` points to a live, initialised `T` of `len` bytes for the
            // duration of the call; the kernel only reads it.
            let rc = unsafe {
                libc::setsockopt(
                    self.0.as_raw_fd(),
                    level,
                    name,
                    std::ptr::from_ref(value).cast(),
                    len,
                )
            };
            if rc < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }

        /// Sends one request; returns the payload messages that came before the final ack.
        fn request(&self, msg: &[u8]) -> Result<Vec<Vec<u8>>, NlError> {
            // SAFETY: `msg` is a live buffer of `msg.len()` bytes; the kernel only reads it.
            let sent = unsafe { libc::send(self.0.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
            if sent < 0 {
                return Err(io::Error::last_os_error().into());
            }
            let mut buf = vec![0u8; 64 * 1024];
            let mut replies = Vec::new();
            loop {
                // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
                let n = unsafe {
                    libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0)
                };
                let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
                let mut rest = buf.get(..n).unwrap_or_default();
                while rest.len() >= NLMSG_HDRLEN {
                    let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                    let kind = u16::from_ne_bytes([rest[4], rest[5]]);
                    let flags = u16::from_ne_bytes([rest[6], rest[7]]);
                    if len < NLMSG_HDRLEN || len > rest.len() {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "bad netlink reply",
                        )
                        .into());
                    }
                    let m = &rest[..len];
                    match kind {
                        NLMSG_ERROR => return ack(m, flags).map(|()| replies),
                        RTM_NEWLINK => replies.push(m.to_vec()),
                        _ => {}
                    }
                    rest = rest.get(len.next_multiple_of(4)..).unwrap_or_default();
                }
            }
        }
    }

    /// Decodes an `NLMSG_ERROR` message: error 0 is the ack.
    fn ack(m: &[u8], flags: u16) -> Result<(), NlError> {
        let err = m
            .get(NLMSG_HDRLEN..NLMSG_HDRLEN + 4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_ne_bytes)
            .ok_or_else(|| {
                NlError::from(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "short netlink error",
                ))
            })?;
        if err == 0 {
            return Ok(());
        }
        // nlmsgerr = error code + the request echoed back: only its header when the kernel
        // honoured NETLINK_CAP_ACK (NLM_F_CAPPED), else all of it. TLVs follow.
        let echoed = if flags & NLM_F_CAPPED != 0 {
            NLMSG_HDRLEN
        } else {
            m.get(NLMSG_HDRLEN + 4..NLMSG_HDRLEN + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(NLMSG_HDRLEN, |b| u32::from_ne_bytes(b) as usize)
                .next_multiple_of(4)
        };
        let extack = if flags & NLM_F_ACK_TLVS != 0 {
            m.get(NLMSG_HDRLEN + 4 + echoed..)
                .and_then(|tlvs| attrs_of(tlvs).find(|(t, _)| *t == NLMSGERR_ATTR_MSG))
                .map(|(_, v)| {
                    String::from_utf8_lossy(v.split(|b| *b == 0).next().unwrap_or(v)).into_owned()
                })
        } else {
            None
        };
        Err(NlError {
            errno: io::Error::from_raw_os_error(-err),
            extack,
        })
    }

    use crate::ifaddr::attrs_of;
}
