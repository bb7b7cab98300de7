//! Proof by traffic that frames the XDP program hands on reach where they are meant to go:
//! the AF_XDP sockets (frames the program redirected, against what the workers received), or
//! a native-mode veth's peer (answers the program sent with `XDP_TX`, against the peer's
//! `xdp_xmit` counter).
//!
//! The start-up self-test proves the path by injecting a live frame
//! (`BPF_F_TEST_XDP_LIVE_FRAMES`). Some kernels refuse that (hardened ones, sandboxes: `EPERM`),
//! and an XDP dataplane must not be lost because its self-test cannot run there. Then the
//! program is test-run on the self-test frame (which proves its maps: destination, port,
//! the queue's socket in the XSKMAP) and the rest is proven by the first real queries:
//! this watch compares two counters that must move together and says when the second has
//! stood still for a while the first moved enough; the caller then falls back to the kernel
//! sockets. It runs after a live-frame proof too, for a path that breaks later.
//!
//! Pure logic on counter samples and a millisecond clock the caller supplies, so that it
//! is unit-tested here without a NIC.

/// Frames handed to the AF_XDP sockets with nothing received before that path is called
/// broken: a few lost queries are no proof (the kernel may have dropped them for a full
/// ring), dozens are.
pub const MIN_LOST: u64 = 32;
/// How long the workers' counter must stand still while [`MIN_LOST`] frames were handed
/// on: longer than any scheduling stall of a worker (seconds under QEMU's TCG emulation).
pub const STILL_MS: u64 = 5_000;
/// For answers sent to a veth's peer: its `xdp_xmit` counter moves in the same softirq as
/// the program's redirect (`veth_xdp_xmit`), no thread has to run for it, so a few answers
/// and one sampling period without it are proof enough, and every answer lost costs a
/// client a retry.
pub const TX_MIN_LOST: u64 = 4;
/// See [`TX_MIN_LOST`]: one sampling period.
pub const TX_STILL_MS: u64 = 250;

/// What one sample showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Nothing new to say.
    Nothing,
    /// The receiving counter moved for the first time: the path is proven by traffic.
    Proven,
    /// `lost` frames were handed on over `still_ms` milliseconds and none was received.
    Broken {
        /// Frames handed on since the receiving counter last moved.
        lost: u64,
        /// Milliseconds since the first of them.
        still_ms: u64,
    },
}

/// One watched pair of counters: `sent` (the program's) and `received` (the far side's).
#[derive(Clone, Debug)]
pub struct Watch {
    min_lost: u64,
    still_ms: u64,
    proven: bool,
    last_sent: u64,
    last_received: u64,
    /// The `sent` value and the time when frames began to go unreceived.
    suspect: Option<(u64, u64)>,
}

impl Watch {
    /// Starts from the counters as they are now (frames before this are not judged), for
    /// the path to the AF_XDP sockets ([`MIN_LOST`], [`STILL_MS`]).
    pub fn new(sent: u64, received: u64) -> Self {
        Self::with_bounds(sent, received, MIN_LOST, STILL_MS)
    }

    /// The same with other bounds: `min_lost` frames handed on over `still_ms` with
    /// nothing received is a broken path.
    pub fn with_bounds(sent: u64, received: u64, min_lost: u64, still_ms: u64) -> Self {
        Self {
            min_lost,
            still_ms,
            proven: false,
            last_sent: sent,
            last_received: received,
            suspect: None,
        }
    }

    /// Whether the receiving side has moved since the watch began.
    pub fn proven(&self) -> bool {
        self.proven
    }

    /// Takes one sample at `now_ms`. Counters only grow; a counter that went back (a
    /// program replaced) restarts the watch from the new values.
    pub fn sample(&mut self, now_ms: u64, sent: u64, received: u64) -> Seen {
        if sent < self.last_sent || received < self.last_received {
            *self = Self {
                proven: self.proven,
                ..Self::with_bounds(sent, received, self.min_lost, self.still_ms)
            };
            return Seen::Nothing;
        }
        let (sent_before, received_moved) = (self.last_sent, received > self.last_received);
        self.last_sent = sent;
        self.last_received = received;
        if received_moved {
            self.suspect = None;
            if !self.proven {
                self.proven = true;
                return Seen::Proven;
            }
            return Seen::Nothing;
        }
        if sent == sent_before {
            return Seen::Nothing;
        }
        let (from, since) = *self.suspect.get_or_insert((sent_before, now_ms));
        let (lost, still_ms) = (sent - from, now_ms.saturating_sub(since));
        if lost >= self.min_lost && still_ms >= self.still_ms {
            return Seen::Broken { lost, still_ms };
        }
        Seen::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_frames_prove_the_path_once() {
        let mut w = Watch::new(10, 3);
        assert_eq!(w.sample(100, 10, 3), Seen::Nothing);
        assert_eq!(w.sample(200, 12, 3), Seen::Nothing);
        assert_eq!(w.sample(300, 12, 5), Seen::Proven);
        assert!(w.proven());
        assert_eq!(w.sample(400, 20, 13), Seen::Nothing);
    }

    #[test]
    fn frames_that_never_arrive_break_the_path_after_the_window() {
        let mut w = Watch::new(0, 0);
        // A trickle: 40 frames over 4.9 s is not yet enough time.
        for i in 1..=49u64 {
            assert_eq!(w.sample(i * 100, i, 0), Seen::Nothing, "at {i}");
        }
        // The first unreceived frame was seen at 100 ms; 5 s later it is broken.
        assert_eq!(
            w.sample(5_100, 50, 0),
            Seen::Broken {
                lost: 50,
                still_ms: 5_000
            }
        );
    }

    #[test]
    fn few_lost_frames_are_no_proof_however_long() {
        let mut w = Watch::new(0, 0);
        assert_eq!(w.sample(100, MIN_LOST - 1, 0), Seen::Nothing);
        assert_eq!(w.sample(60_000, MIN_LOST - 1, 0), Seen::Nothing);
        assert_eq!(
            w.sample(60_100, MIN_LOST, 0),
            Seen::Broken {
                lost: MIN_LOST,
                still_ms: 60_000
            }
        );
    }

    #[test]
    fn a_received_frame_clears_the_suspicion() {
        let mut w = Watch::new(0, 0);
        assert_eq!(w.sample(0, 100, 0), Seen::Nothing);
        assert_eq!(w.sample(4_000, 200, 1), Seen::Proven);
        // Lost again from 4 s on: the window starts again there.
        assert_eq!(w.sample(5_000, 300, 1), Seen::Nothing);
        assert_eq!(w.sample(9_900, 400, 1), Seen::Nothing);
        assert!(matches!(
            w.sample(10_000, 401, 1),
            Seen::Broken { lost: 201, .. }
        ));
    }

    #[test]
    fn quiet_interfaces_are_never_judged() {
        let mut w = Watch::new(5, 5);
        for t in 0..1_000u64 {
            assert_eq!(w.sample(t * 1_000, 5, 5), Seen::Nothing);
        }
        assert!(!w.proven());
    }

    #[test]
    fn a_veth_peer_that_takes_nothing_is_found_within_a_sampling_period() {
        let mut w = Watch::with_bounds(0, 0, TX_MIN_LOST, TX_STILL_MS);
        assert_eq!(w.sample(250, 2, 0), Seen::Nothing);
        assert_eq!(w.sample(500, 3, 0), Seen::Nothing);
        assert_eq!(
            w.sample(750, 9, 0),
            Seen::Broken {
                lost: 9,
                still_ms: 500
            }
        );
        // A peer that takes them is proven at once, whatever was in flight between reads.
        let mut w = Watch::with_bounds(0, 0, TX_MIN_LOST, TX_STILL_MS);
        assert_eq!(w.sample(250, 40, 36), Seen::Proven);
        assert_eq!(w.sample(500, 80, 76), Seen::Nothing);
    }

    #[test]
    fn counters_that_go_back_restart_the_watch() {
        let mut w = Watch::new(1_000, 0);
        assert_eq!(w.sample(0, 1_100, 0), Seen::Nothing);
        assert_eq!(w.sample(100, 3, 0), Seen::Nothing);
        assert_eq!(w.sample(6_000, 4, 0), Seen::Nothing);
    }
}
