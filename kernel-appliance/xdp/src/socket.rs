//! Creating an AF_XDP socket bound to one NIC queue: UMEM registration, ring sizing, the
//! four ring mappings, bind (zero-copy attempted, then copy mode), statistics.
//!
//! Follows Documentation/networking/af_xdp.rst. Every syscall is a direct libc call on
//! memory this module owns; the mappings are unmapped when the socket is dropped.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

use crate::queue::{Queue, Umem, XdpDesc};
use crate::ring::{ConsRing, ProdRing, RingParts};

/// Sizing of one socket.
#[derive(Clone, Copy, Debug)]
pub struct XskConfig {
    /// UMEM frames (a power of two is friendliest to the rings).
    pub frames: u32,
    /// Frame size: 2048 or 4096 (aligned chunk mode).
    pub frame_size: u32,
    /// Entries of each ring (power of two).
    pub ring_size: u32,
    /// Descriptors handled per batch.
    pub batch: usize,
    /// Refuse copy mode (fail instead of falling back).
    pub zero_copy_only: bool,
    /// Do not even try zero-copy.
    pub copy_only: bool,
}

impl Default for XskConfig {
    fn default() -> Self {
        Self {
            frames: 4096,
            frame_size: 4096,
            ring_size: 2048,
            batch: 64,
            zero_copy_only: false,
            copy_only: false,
        }
    }
}

/// How the socket ended up bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindMode {
    /// XDP_ZEROCOPY: the NIC DMAs into our UMEM.
    ZeroCopy,
    /// XDP_COPY: the kernel copies frames (veth, generic XDP, most virtual NICs).
    Copy,
}

impl BindMode {
    /// Lower-case name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ZeroCopy => "zero-copy",
            Self::Copy => "copy",
        }
    }
}

/// Kernel counters of one socket (`XDP_STATISTICS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Dropped for other reasons than invalid descriptors (e.g. no room in RX).
    pub rx_dropped: u64,
    /// Invalid RX descriptors.
    pub rx_invalid_descs: u64,
    /// Invalid TX descriptors.
    pub tx_invalid_descs: u64,
    /// RX ring full.
    pub rx_ring_full: u64,
    /// Fill ring empty when a frame arrived.
    pub rx_fill_ring_empty_descs: u64,
    /// TX ring empty when the kernel looked.
    pub tx_ring_empty_descs: u64,
}

/// An anonymous or socket mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; access is coordinated by the rings' protocol.
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(len: usize, fd: Option<RawFd>, offset: i64) -> io::Result<Self> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        // SAFETY: asks the kernel for a fresh mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Self { ptr, len })
    }

    fn at(&self, off: u64) -> *mut u8 {
        // Offsets come from XDP_MMAP_OFFSETS and are inside the mapping by construction
        // (the mapping length is desc offset + entries).
        self.ptr.as_ptr().wrapping_add(off as usize)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing uses the memory after
        // the socket (and its rings) is dropped, which owns this mapping.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn setsockopt<T>(fd: RawFd, opt: i32, val: &T) -> io::Result<()> {
    // SAFETY: passes a pointer to a live T and its exact size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            std::ptr::from_ref(val).cast(),
            // Cannot truncate: option structs are small.
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getsockopt<T>(fd: RawFd, opt: i32) -> io::Result<T> {
    // SAFETY: the option structs used here are plain integers, valid when zeroed.
    let mut val: T = unsafe { zeroed() };
    // Cannot truncate: option structs are small.
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `val`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            std::ptr::from_mut(&mut val).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(val)
}

/// An AF_XDP socket bound to (interface, queue), with its rings and UMEM.
pub struct XskSocket {
    // Field order matters for drop: the queue's raw pointers die before the mappings.
    queue: Queue,
    _rings: [Mapping; 4],
    _umem: Mapping,
    fd: OwnedFd,
    mode: BindMode,
    ifindex: u32,
    queue_id: u32,
}

impl XskSocket {
    /// Creates the socket, registers a fresh UMEM, maps the rings and binds to
    /// `ifindex`/`queue_id`, trying zero-copy first unless told otherwise.
    pub fn open(ifindex: u32, queue_id: u32, cfg: &XskConfig) -> io::Result<Self> {
        // SAFETY: plain syscall with constant arguments.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem_len = cfg.frames as usize * cfg.frame_size as usize;
        // The UMEM must be locked memory: as root (CAP_IPC_LOCK) that is automatic; otherwise
        // RLIMIT_MEMLOCK must allow it (ENOBUFS otherwise, see the feasibility guide).
        let umem = Mapping::new(umem_len, None, 0)?;
        // SAFETY: all-zero is a valid xdp_umem_reg; fields set below.
        let mut reg: libc::xdp_umem_reg = unsafe { zeroed() };
        reg.addr = umem.ptr.as_ptr() as u64;
        reg.len = umem_len as u64;
        reg.chunk_size = cfg.frame_size;
        setsockopt(raw, libc::XDP_UMEM_REG, &reg)?;
        setsockopt(raw, libc::XDP_UMEM_FILL_RING, &cfg.ring_size)?;
        setsockopt(raw, libc::XDP_UMEM_COMPLETION_RING, &cfg.ring_size)?;
        setsockopt(raw, libc::XDP_RX_RING, &cfg.ring_size)?;
        setsockopt(raw, libc::XDP_TX_RING, &cfg.ring_size)?;
        let off: libc::xdp_mmap_offsets = getsockopt(raw, libc::XDP_MMAP_OFFSETS)?;
        let n = cfg.ring_size as u64;
        let map = |o: &libc::xdp_ring_offset, entry: u64, pgoff: i64| {
            let len = (o.desc + n * entry) as usize;
            Mapping::new(len, Some(raw), pgoff)
        };
        let fill_m = map(&off.fr, 8, libc::XDP_UMEM_PGOFF_FILL_RING as i64)?;
        let comp_m = map(&off.cr, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64)?;
        let rx_m = map(&off.rx, 16, libc::XDP_PGOFF_RX_RING)?;
        let tx_m = map(&off.tx, 16, libc::XDP_PGOFF_TX_RING)?;
        let parts = |m: &Mapping, o: &libc::xdp_ring_offset| RingParts {
            producer: m.at(o.producer).cast::<AtomicU32>(),
            consumer: m.at(o.consumer).cast::<AtomicU32>(),
            flags: m.at(o.flags).cast::<AtomicU32>(),
            entries: m.at(o.desc),
            size: cfg.ring_size,
        };
        // SAFETY (all four): each RingParts points into its own live mapping laid out as the
        // kernel reported (XDP_MMAP_OFFSETS); the mappings are stored in the returned value
        // and outlive the rings (field order); we are the only user-space producer/consumer.
        // SAFETY: see above (fill ring).
        let fill = unsafe { ProdRing::<u64>::from_parts(parts(&fill_m, &off.fr)) };
        // SAFETY: see above (completion ring).
        let comp = unsafe { ConsRing::<u64>::from_parts(parts(&comp_m, &off.cr)) };
        // SAFETY: see above (RX ring).
        let rx = unsafe { ConsRing::<XdpDesc>::from_parts(parts(&rx_m, &off.rx)) };
        // SAFETY: see above (TX ring).
        let tx = unsafe { ProdRing::<XdpDesc>::from_parts(parts(&tx_m, &off.tx)) };
        // SAFETY: the UMEM mapping is stored next to the queue and outlives it; only the
        // kernel (through descriptors) and the queue access it.
        let area = unsafe { Umem::from_raw(umem.ptr.as_ptr(), umem_len, cfg.frame_size as usize) };
        let queue = Queue::new(fill, comp, rx, tx, area, cfg.batch);
        let mode = Self::bind(raw, ifindex, queue_id, cfg)?;
        Ok(Self {
            queue,
            _rings: [fill_m, comp_m, rx_m, tx_m],
            _umem: umem,
            fd,
            mode,
            ifindex,
            queue_id,
        })
    }

    fn bind(fd: RawFd, ifindex: u32, queue_id: u32, cfg: &XskConfig) -> io::Result<BindMode> {
        let attempt = |flags: u16| -> io::Result<()> {
            // SAFETY: all-zero is a valid sockaddr_xdp; fields set below.
            let mut sa: libc::sockaddr_xdp = unsafe { zeroed() };
            // Cannot truncate: AF_XDP is 44.
            sa.sxdp_family = libc::AF_XDP as u16;
            sa.sxdp_flags = flags | libc::XDP_USE_NEED_WAKEUP;
            sa.sxdp_ifindex = ifindex;
            sa.sxdp_queue_id = queue_id;
            // SAFETY: passes a live sockaddr_xdp and its exact size.
            let r = unsafe {
                libc::bind(
                    fd,
                    std::ptr::from_ref(&sa).cast(),
                    // Cannot truncate: 16 bytes.
                    size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        if !cfg.copy_only {
            match attempt(libc::XDP_ZEROCOPY) {
                Ok(()) => return Ok(BindMode::ZeroCopy),
                Err(e) if cfg.zero_copy_only => return Err(e),
                // EOPNOTSUPP (veth, generic mode) or EINVAL: fall back to copy mode.
                Err(_) => {}
            }
        }
        attempt(libc::XDP_COPY).map(|()| BindMode::Copy)
    }

    /// The ring/UMEM queue (the worker's loop).
    pub fn queue(&mut self) -> &mut Queue {
        &mut self.queue
    }

    /// How the socket is bound.
    pub fn mode(&self) -> BindMode {
        self.mode
    }

    /// Interface index and queue id.
    pub fn target(&self) -> (u32, u32) {
        (self.ifindex, self.queue_id)
    }

    /// Kernel counters (`XDP_STATISTICS`).
    pub fn stats(&self) -> io::Result<XskStats> {
        let s: libc::xdp_statistics = getsockopt(self.fd.as_raw_fd(), libc::XDP_STATISTICS)?;
        Ok(XskStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }

    /// Kicks the kernel to transmit what is on the TX ring (needed in copy mode, and
    /// whenever TX has XDP_RING_NEED_WAKEUP set).
    pub fn wakeup_tx(&self) {
        // SAFETY: a zero-length sendto with no address: the documented AF_XDP TX kick.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        // EAGAIN/EBUSY/ENOBUFS mean "try again on the next batch"; nothing to do here.
        let _ = r;
    }

    /// Waits until frames arrive or `timeout_ms` passes; also serves as the RX wakeup when
    /// the fill ring has NEED_WAKEUP. Returns whether frames may be waiting.
    pub fn wait_rx(&self, timeout_ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        r > 0
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
