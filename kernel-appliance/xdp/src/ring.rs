//! The four AF_XDP rings (fill, completion, RX, TX), in Rust so that every operation inlines
//! into the worker loop (the afxdp crate's to-do; libbpf's `xsk.h` keeps them as C inlines
//! that Rust cannot inline).
//!
//! A ring is single-producer / single-consumer shared memory (Documentation/networking/af_xdp.rst):
//! a producer index, a consumer index, a flags word and a power-of-two array of entries. We
//! produce on fill and TX and consume on RX and completion. Indices are free-running u32;
//! `index & mask` is the slot. The kernel side is read with Acquire and our updates are
//! published with Release, as libbpf does (`__atomic_load_n(.., ACQUIRE)` / store RELEASE).

use core::marker::PhantomData;
use core::sync::atomic::{AtomicU32, Ordering};

/// Where a ring lives: pointers into a mapping (or test memory) that outlives the ring.
#[derive(Clone, Copy, Debug)]
pub struct RingParts {
    /// The producer index.
    pub producer: *const AtomicU32,
    /// The consumer index.
    pub consumer: *const AtomicU32,
    /// The flags word (XDP_RING_NEED_WAKEUP).
    pub flags: *const AtomicU32,
    /// The first entry.
    pub entries: *mut u8,
    /// Number of entries, a power of two.
    pub size: u32,
}

/// Borrows a ring index word.
///
/// # Safety
/// `p` must point to a live, aligned `AtomicU32` for the lifetime `'a`.
unsafe fn word<'a>(p: *const AtomicU32) -> &'a AtomicU32 {
    // SAFETY: guaranteed by the caller.
    unsafe { &*p }
}

/// A ring we produce into (fill: `u64` addresses; TX: descriptors).
pub struct ProdRing<T: Copy> {
    p: RingParts,
    mask: u32,
    cached_prod: u32,
    cached_cons: u32,
    _t: PhantomData<T>,
}

/// A ring we consume from (RX: descriptors; completion: `u64` addresses).
pub struct ConsRing<T: Copy> {
    p: RingParts,
    mask: u32,
    cached_prod: u32,
    cached_cons: u32,
    _t: PhantomData<T>,
}

// SAFETY: a ring is used by one thread at a time (one worker owns its queue); the pointers
// target a mapping owned alongside the ring (see `from_parts`), valid from any thread.
unsafe impl<T: Copy> Send for ProdRing<T> {}
// SAFETY: as for ProdRing.
unsafe impl<T: Copy> Send for ConsRing<T> {}

impl<T: Copy> ProdRing<T> {
    /// # Safety
    /// `parts` must point to a live ring of `size` entries of `T` (size a power of two)
    /// whose memory outlives this value and which nothing else produces into.
    pub unsafe fn from_parts(parts: RingParts) -> Self {
        // SAFETY: the caller guarantees the indices are valid, aligned atomics.
        let prod = unsafe { word(parts.producer) }.load(Ordering::Relaxed);
        // SAFETY: as above.
        let cons = unsafe { word(parts.consumer) }.load(Ordering::Acquire);
        Self {
            p: parts,
            mask: parts.size - 1,
            cached_prod: prod,
            // Free slots = cached_cons - cached_prod (libbpf keeps consumer + size here).
            cached_cons: cons.wrapping_add(parts.size),
            _t: PhantomData,
        }
    }

    /// Free slots, refreshing the kernel's consumer index only when needed.
    #[inline]
    pub fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        // SAFETY: valid atomic for the lifetime of the ring (from_parts contract).
        let cons = unsafe { word(self.p.consumer) }.load(Ordering::Acquire);
        self.cached_cons = cons.wrapping_add(self.p.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Writes up to `items.len()` entries (as many as there is room for) and publishes them.
    /// Returns how many were produced.
    #[inline]
    pub fn produce(&mut self, items: &[T]) -> usize {
        // Cannot truncate: batches are far below u32::MAX.
        let n = self.free(items.len() as u32).min(items.len() as u32);
        for (i, item) in items.iter().take(n as usize).enumerate() {
            let slot = (self.cached_prod.wrapping_add(i as u32) & self.mask) as usize;
            // SAFETY: slot < size, so the write stays inside the entry array; the slot is
            // free (between producer and consumer + size) so the kernel is not reading it.
            unsafe {
                self.p
                    .entries
                    .cast::<T>()
                    .wrapping_add(slot)
                    .write_volatile(*item)
            };
        }
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // SAFETY: valid atomic (from_parts contract). Release: entries before index.
        unsafe { word(self.p.producer) }.store(self.cached_prod, Ordering::Release);
        n as usize
    }

    /// Whether the kernel asked to be woken up (XDP_USE_NEED_WAKEUP).
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: valid atomic (from_parts contract).
        unsafe { word(self.p.flags) }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Entries produced and not yet consumed by the kernel.
    pub fn in_flight(&self) -> u32 {
        // SAFETY: valid atomic (from_parts contract).
        let cons = unsafe { word(self.p.consumer) }.load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(cons)
    }
}

impl<T: Copy> ConsRing<T> {
    /// # Safety
    /// As [`ProdRing::from_parts`], for a ring nothing else consumes from.
    pub unsafe fn from_parts(parts: RingParts) -> Self {
        // SAFETY: the caller guarantees valid, aligned atomics.
        let prod = unsafe { word(parts.producer) }.load(Ordering::Acquire);
        // SAFETY: as above.
        let cons = unsafe { word(parts.consumer) }.load(Ordering::Relaxed);
        Self {
            p: parts,
            mask: parts.size - 1,
            cached_prod: prod,
            cached_cons: cons,
            _t: PhantomData,
        }
    }

    /// Reads up to `out.len()` entries into `out`, releases their slots, returns the count.
    #[inline]
    pub fn consume(&mut self, out: &mut [T]) -> usize {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail == 0 {
            // SAFETY: valid atomic (from_parts contract). Acquire: index before entries.
            self.cached_prod = unsafe { word(self.p.producer) }.load(Ordering::Acquire);
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        // Cannot truncate: batches are far below u32::MAX.
        let n = avail.min(out.len() as u32);
        for (i, o) in out.iter_mut().take(n as usize).enumerate() {
            let slot = (self.cached_cons.wrapping_add(i as u32) & self.mask) as usize;
            // SAFETY: slot < size; the slot lies between consumer and producer, so the
            // kernel published it and will not touch it until we release it below.
            *o = unsafe {
                self.p
                    .entries
                    .cast::<T>()
                    .wrapping_add(slot)
                    .read_volatile()
            };
        }
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // SAFETY: valid atomic (from_parts contract). Release: reads before index.
        unsafe { word(self.p.consumer) }.store(self.cached_cons, Ordering::Release);
        n as usize
    }
}

#[cfg(test)]
pub(crate) mod test_ring {
    //! Ring memory in a plain allocation, with the kernel side simulated.
    use super::*;
    use std::boxed::Box;
    use std::vec::Vec;

    /// A ring's memory: header words then entries, like the kernel mapping.
    pub struct Mem {
        words: Box<[AtomicU32; 4]>,
        entries: Vec<u64>,
        size: u32,
    }

    impl Mem {
        /// `size` entries of up to 16 bytes (room for an xdp_desc).
        pub fn new(size: u32) -> Self {
            Self {
                words: Box::new([
                    AtomicU32::new(0),
                    AtomicU32::new(0),
                    AtomicU32::new(0),
                    AtomicU32::new(0),
                ]),
                entries: std::vec![0u64; 2 * size as usize],
                size,
            }
        }

        pub fn parts(&mut self) -> RingParts {
            RingParts {
                producer: &self.words[0],
                consumer: &self.words[1],
                flags: &self.words[2],
                entries: self.entries.as_mut_ptr().cast(),
                size: self.size,
            }
        }

        /// The "kernel" as consumer of a ring we produce into.
        pub fn kernel_consume<T: Copy + Default>(&mut self, max: usize) -> Vec<T> {
            let p = self.parts();
            // SAFETY: test memory lives as long as `self`; the test plays the kernel.
            let mut r = unsafe { ConsRing::<T>::from_parts(p) };
            let mut v = std::vec![T::default(); max];
            let n = r.consume(&mut v);
            v.truncate(n);
            v
        }

        /// The "kernel" as producer into a ring we consume from.
        pub fn kernel_produce<T: Copy>(&mut self, items: &[T]) -> usize {
            let p = self.parts();
            // SAFETY: as above.
            let mut r = unsafe { ProdRing::<T>::from_parts(p) };
            r.produce(items)
        }

        pub fn set_flags(&self, f: u32) {
            self.words[2].store(f, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_ring::Mem;
    use super::*;

    #[test]
    fn produce_until_full_then_drain() {
        let mut m = Mem::new(8);
        // SAFETY: test memory outlives the ring.
        let mut fill = unsafe { ProdRing::<u64>::from_parts(m.parts()) };
        assert_eq!(fill.produce(&[1, 2, 3, 4, 5, 6]), 6);
        assert_eq!(fill.produce(&[7, 8, 9, 10]), 2, "only 2 free slots");
        assert_eq!(fill.in_flight(), 8);
        let got: std::vec::Vec<u64> = m.kernel_consume(5);
        assert_eq!(got, [1, 2, 3, 4, 5]);
        assert_eq!(fill.produce(&[9, 10, 11, 12, 13, 14]), 5);
        let got: std::vec::Vec<u64> = m.kernel_consume(100);
        assert_eq!(got, [6, 7, 8, 9, 10, 11, 12, 13]);
    }

    #[test]
    fn consume_wraps_around() {
        let mut m = Mem::new(4);
        // SAFETY: test memory outlives the ring.
        let mut comp = unsafe { ConsRing::<u64>::from_parts(m.parts()) };
        let mut out = [0u64; 3];
        for round in 0..10u64 {
            assert_eq!(
                m.kernel_produce(&[round * 10, round * 10 + 1, round * 10 + 2]),
                3
            );
            assert_eq!(comp.consume(&mut out), 3);
            assert_eq!(out, [round * 10, round * 10 + 1, round * 10 + 2]);
        }
        assert_eq!(comp.consume(&mut out), 0);
    }

    #[test]
    fn wakeup_flag() {
        let mut m = Mem::new(4);
        // SAFETY: test memory outlives the ring.
        let tx = unsafe { ProdRing::<u64>::from_parts(m.parts()) };
        assert!(!tx.needs_wakeup());
        m.set_flags(libc::XDP_RING_NEED_WAKEUP);
        assert!(tx.needs_wakeup());
    }
}
