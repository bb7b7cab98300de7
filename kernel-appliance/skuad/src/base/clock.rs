//! The daemon's clock for response rate limiting: whole seconds of the monotonic clock
//! since the process first asked. Every dataplane of the process reads this one clock (the
//! kernel-socket workers, TCP, the AF_XDP workers): they share the engine's rate-limiting
//! table, whose accounts count in these seconds.

use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();

/// Whole seconds since the first call, monotonic (`Instant`: `CLOCK_MONOTONIC`, never
/// stepped by NTP or the operator).
pub fn now_secs() -> u32 {
    let start = START.get_or_init(Instant::now);
    // Cannot truncate before 136 years of uptime; saturates after.
    u32::try_from(start.elapsed().as_secs()).unwrap_or(u32::MAX)
}

/// Milliseconds since the first call, on the same clock as [`now_secs`] (whole seconds of
/// it are `now_secs()`): the resolver's timers, whose cache expiries the engine compares
/// with `now_secs()`.
pub fn now_millis() -> u64 {
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_seconds() {
        let a = now_secs();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let b = now_secs();
        assert!(b > a && b - a <= 2, "{a} then {b}");
    }
}
