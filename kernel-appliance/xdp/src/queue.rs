//! Frame ownership, in one place: fill → RX → (TX → completion | released) → fill.
//!
//! Every UMEM frame is always in exactly one of these hands:
//! - **ours, free** (`free` stack),
//! - **the kernel's, to receive into** (produced on the fill ring),
//! - **ours, received** (consumed from RX, being answered),
//! - **the kernel's, to transmit** (produced on TX) until it comes back on the completion ring.
//!
//! A received frame is either rewritten into the reply and handed to TX (answered in place,
//! no copy), or released to `free`. Frames come back from completion to `free`, and `free`
//! tops up the fill ring. A frame must never be on fill and TX at once (AF_XDP pitfall 10 in
//! the feasibility guide): this module is the only code that moves addresses between rings,
//! and its tests check that the count of frames is conserved.

use std::vec::Vec;

use crate::ring::{ConsRing, ProdRing};

/// An RX/TX descriptor (`struct xdp_desc`, linux/if_xdp.h).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpDesc {
    /// UMEM offset of the packet data.
    pub addr: u64,
    /// Packet length.
    pub len: u32,
    /// Options (unused).
    pub options: u32,
}

const _: () = assert!(core::mem::size_of::<XdpDesc>() == 16);

/// The UMEM area: `count` frames of `frame_size` bytes (a power of two), in one mapping.
pub struct Umem {
    base: *mut u8,
    len: usize,
    frame_size: usize,
}

// SAFETY: the area is owned by one queue, used by one thread at a time.
unsafe impl Send for Umem {}

impl Umem {
    /// # Safety
    /// `base..base+len` must be valid, writable memory that outlives this value and that
    /// only the kernel (through the rings) and this value access; `frame_size` a power of
    /// two dividing `len`.
    pub unsafe fn from_raw(base: *mut u8, len: usize, frame_size: usize) -> Self {
        Self {
            base,
            len,
            frame_size,
        }
    }

    /// Number of frames.
    pub fn frames(&self) -> usize {
        self.len / self.frame_size
    }

    /// Frame size.
    pub fn frame_size(&self) -> usize {
        self.frame_size
    }

    /// Address of frame `i`.
    pub fn frame_addr(&self, i: usize) -> u64 {
        (i * self.frame_size) as u64
    }

    /// The start of the frame (chunk) holding `addr`.
    pub fn chunk(&self, addr: u64) -> u64 {
        addr & !(self.frame_size as u64 - 1)
    }

    /// The bytes from `addr` to the end of its frame, or `None` for an address outside the
    /// area (a kernel bug or a corrupt descriptor: never trusted blindly).
    pub fn data_mut(&mut self, addr: u64) -> Option<&mut [u8]> {
        let start = usize::try_from(addr).ok()?;
        if start >= self.len {
            return None;
        }
        let end = (start & !(self.frame_size - 1)) + self.frame_size;
        // SAFETY: start < end <= len (frame_size divides len), inside the area this value
        // owns (from_raw contract); the frame is ours (received), so the kernel does not
        // touch it while the returned borrow of `self` lives.
        Some(unsafe { core::slice::from_raw_parts_mut(self.base.wrapping_add(start), end - start) })
    }
}

/// What to do with a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxAction {
    /// The frame now holds a reply of this length: transmit it.
    Transmit(usize),
    /// Done with it: back to the free pool.
    Release,
}

/// Counters of one queue (ours; the kernel's are in XDP_STATISTICS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Frames received.
    pub rx: u64,
    /// Replies produced on TX.
    pub tx: u64,
    /// Replies dropped because the TX ring was full.
    pub tx_ring_full: u64,
    /// Descriptors with an address outside the UMEM (ignored).
    pub bad_desc: u64,
}

/// One AF_XDP queue: its four rings, its UMEM and the free list.
pub struct Queue {
    fill: ProdRing<u64>,
    comp: ConsRing<u64>,
    rx: ConsRing<XdpDesc>,
    tx: ProdRing<XdpDesc>,
    umem: Umem,
    free: Vec<u64>,
    rx_batch: Vec<XdpDesc>,
    tx_batch: Vec<XdpDesc>,
    addrs: Vec<u64>,
    /// Counters.
    pub counters: QueueCounters,
}

impl Queue {
    /// Assembles a queue; every frame starts free. `batch` bounds RX/TX/fill work per call.
    pub fn new(
        fill: ProdRing<u64>,
        comp: ConsRing<u64>,
        rx: ConsRing<XdpDesc>,
        tx: ProdRing<XdpDesc>,
        umem: Umem,
        batch: usize,
    ) -> Self {
        let free = (0..umem.frames())
            .rev()
            .map(|i| umem.frame_addr(i))
            .collect();
        Self {
            fill,
            comp,
            rx,
            tx,
            umem,
            free,
            rx_batch: std::vec![XdpDesc::default(); batch],
            tx_batch: Vec::with_capacity(batch),
            addrs: std::vec![0; batch.max(64)],
            counters: QueueCounters::default(),
        }
    }

    /// Frames currently free (ours, idle).
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// Completed transmissions go back to the free pool. Returns how many.
    #[inline]
    pub fn reap_completions(&mut self) -> usize {
        let mut total = 0;
        loop {
            let n = self.comp.consume(&mut self.addrs);
            for &a in &self.addrs[..n] {
                let c = self.umem.chunk(a);
                self.free.push(c);
            }
            total += n;
            if n < self.addrs.len() {
                return total;
            }
        }
    }

    /// Gives free frames to the kernel to receive into. Returns how many.
    #[inline]
    pub fn refill(&mut self) -> usize {
        let want = self.free.len().min(self.addrs.len());
        if want == 0 {
            return 0;
        }
        let start = self.free.len() - want;
        let n = self.fill.produce(&self.free[start..]);
        // `produce` takes from the front of the slice: drop exactly those from the stack.
        self.free.drain(start..start + n);
        n
    }

    /// Handles up to one batch of received frames with `f(frame bytes, length)`; answers
    /// go to TX. Returns the number of frames received.
    #[inline]
    pub fn process_rx(&mut self, mut f: impl FnMut(&mut [u8], usize) -> RxAction) -> usize {
        let n = self.rx.consume(&mut self.rx_batch);
        self.counters.rx += n as u64;
        self.tx_batch.clear();
        for d in &self.rx_batch[..n] {
            let chunk = self.umem.chunk(d.addr);
            let Some(buf) = self.umem.data_mut(d.addr) else {
                self.counters.bad_desc += 1;
                continue;
            };
            let len = (d.len as usize).min(buf.len());
            match f(buf, len) {
                RxAction::Transmit(out) if out <= buf.len() => self.tx_batch.push(XdpDesc {
                    addr: d.addr,
                    // Cannot truncate: out <= frame size.
                    len: out as u32,
                    options: 0,
                }),
                _ => self.free.push(chunk),
            }
        }
        if !self.tx_batch.is_empty() {
            let sent = self.tx.produce(&self.tx_batch);
            self.counters.tx += sent as u64;
            for d in &self.tx_batch[sent..] {
                self.counters.tx_ring_full += 1;
                let c = self.umem.chunk(d.addr);
                self.free.push(c);
            }
        }
        n
    }

    /// Whether a `sendto` is needed to make the kernel transmit (NEED_WAKEUP on TX).
    #[inline]
    pub fn tx_needs_wakeup(&self) -> bool {
        self.tx.needs_wakeup()
    }

    /// Whether the kernel asked for a wakeup to keep filling RX (NEED_WAKEUP on fill).
    #[inline]
    pub fn fill_needs_wakeup(&self) -> bool {
        self.fill.needs_wakeup()
    }

    /// Frames the kernel holds for transmission (not yet completed).
    pub fn tx_in_flight(&self) -> u32 {
        self.tx.in_flight()
    }

    /// The UMEM, for building frames (self-test).
    pub fn umem_mut(&mut self) -> &mut Umem {
        &mut self.umem
    }

    /// Takes a free frame (self-test transmit); give it back with [`Queue::transmit`].
    pub fn take_free(&mut self) -> Option<u64> {
        self.free.pop()
    }

    /// Transmits `len` bytes at frame `addr` taken with [`Queue::take_free`].
    pub fn transmit(&mut self, addr: u64, len: usize) -> bool {
        let d = XdpDesc {
            addr,
            // Cannot truncate: frames are small.
            len: len as u32,
            options: 0,
        };
        if self.tx.produce(&[d]) == 1 {
            self.counters.tx += 1;
            true
        } else {
            self.free.push(addr);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::test_ring::Mem;

    /// A queue over plain memory, with the test playing the kernel.
    struct Rig {
        fill: Mem,
        comp: Mem,
        rx: Mem,
        tx: Mem,
        _area: Vec<u8>,
        q: Queue,
    }

    fn rig(frames: usize, ring: u32) -> Rig {
        let (mut fill, mut comp, mut rx, mut tx) = (
            Mem::new(ring),
            Mem::new(ring),
            Mem::new(ring),
            Mem::new(ring),
        );
        let mut area = std::vec![0u8; frames * 2048];
        // SAFETY (all five below): the Mem and area allocations live in the Rig next to the
        // queue and are only touched through it and the simulated kernel in these tests.
        // SAFETY: see above.
        let f = unsafe { ProdRing::from_parts(fill.parts()) };
        // SAFETY: see above.
        let c = unsafe { ConsRing::from_parts(comp.parts()) };
        // SAFETY: see above.
        let r = unsafe { ConsRing::from_parts(rx.parts()) };
        // SAFETY: see above.
        let t = unsafe { ProdRing::from_parts(tx.parts()) };
        // SAFETY: see above.
        let u = unsafe { Umem::from_raw(area.as_mut_ptr(), area.len(), 2048) };
        let q = Queue::new(f, c, r, t, u, 16);
        Rig {
            fill,
            comp,
            rx,
            tx,
            _area: area,
            q,
        }
    }

    #[test]
    fn frames_cycle_and_are_conserved() {
        let mut r = rig(32, 16);
        assert_eq!(r.q.refill(), 16, "fill ring holds 16");
        assert_eq!(r.q.free_frames(), 16);
        // Kernel: take 10 frames from fill, deliver 10 packets on RX.
        let given: Vec<u64> = r.fill.kernel_consume(10);
        let descs: Vec<XdpDesc> = given
            .iter()
            .map(|&a| XdpDesc {
                addr: a + 256,
                len: 60,
                options: 0,
            })
            .collect();
        assert_eq!(r.rx.kernel_produce(&descs), 10);
        // Answer even-numbered packets, drop the others.
        let mut i = 0;
        let got = r.q.process_rx(|buf, len| {
            assert_eq!(len, 60);
            assert!(buf.len() >= 2048 - 256);
            i += 1;
            if i % 2 == 0 {
                RxAction::Transmit(80)
            } else {
                RxAction::Release
            }
        });
        assert_eq!(got, 10);
        assert_eq!(r.q.counters.tx, 5);
        assert_eq!(r.q.free_frames(), 16 + 5);
        // Kernel transmits: TX descriptors carry the frame address (with offset) and length.
        let sent: Vec<XdpDesc> = r.tx.kernel_consume(100);
        assert_eq!(sent.len(), 5);
        assert!(sent.iter().all(|d| d.len == 80 && d.addr % 2048 == 256));
        // ...and completes them.
        let done: Vec<u64> = sent.iter().map(|d| d.addr).collect();
        r.comp.kernel_produce(&done);
        assert_eq!(r.q.reap_completions(), 5);
        assert_eq!(r.q.free_frames(), 26, "completions return whole chunks");
        // Conservation: free + still on the fill ring (16 - 10 consumed) = all 32.
        assert_eq!(r.q.free_frames() + 6, 32);
        assert!(r.q.free.iter().all(|a| a % 2048 == 0));
    }

    #[test]
    fn full_tx_ring_releases_frames() {
        let mut r = rig(64, 8);
        r.q.refill();
        let given: Vec<u64> = r.fill.kernel_consume(8);
        let descs: Vec<XdpDesc> = given
            .iter()
            .map(|&a| XdpDesc {
                addr: a,
                len: 40,
                options: 0,
            })
            .collect();
        r.rx.kernel_produce(&descs);
        // TX has 8 slots: fill 6 of them first with the self-test path.
        for _ in 0..6 {
            let a = r.q.take_free().unwrap();
            assert!(r.q.transmit(a, 42));
        }
        let free_before = r.q.free_frames();
        r.q.process_rx(|_, _| RxAction::Transmit(40));
        assert_eq!(r.q.counters.tx_ring_full, 6);
        assert_eq!(r.q.free_frames(), free_before + 6);
    }

    #[test]
    fn corrupt_descriptors_are_ignored() {
        let mut r = rig(4, 4);
        r.q.refill();
        let _: Vec<u64> = r.fill.kernel_consume(4);
        r.rx.kernel_produce(&[XdpDesc {
            addr: 1 << 40,
            len: 60,
            options: 0,
        }]);
        let mut called = false;
        r.q.process_rx(|_, _| {
            called = true;
            RxAction::Release
        });
        assert!(!called);
        assert_eq!(r.q.counters.bad_desc, 1);
    }
}
