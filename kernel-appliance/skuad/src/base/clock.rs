//! The daemon's clock: whole seconds of the monotonic clock since the process first asked.
//! Every dataplane of the process reads this one clock (the kernel-socket workers, TCP, the
//! AF_XDP workers, the resolver and the XDP program): they share the engine's rate-limiting
//! table, whose accounts count in these seconds, and the cache, whose expiries do.
//!
//! It is `CLOCK_MONOTONIC` (never stepped by NTP or the operator) read in nanoseconds from a
//! fixed origin, so that the XDP program, which reads the same clock with
//! `bpf_ktime_get_ns()`, can compute exactly the same second from [`kernel_origin_ns`].

use std::sync::OnceLock;

static ORIGIN: OnceLock<u64> = OnceLock::new();

/// `CLOCK_MONOTONIC` in nanoseconds, the process's view (address leases count in it).
pub fn mono_ns() -> u64 {
    skua_netio::monotonic_ns()
}

fn since_origin_ns() -> u64 {
    let origin = *ORIGIN.get_or_init(mono_ns);
    mono_ns().saturating_sub(origin)
}

/// Whole seconds since the first call, monotonic.
pub fn now_secs() -> u32 {
    // Cannot truncate before 136 years of uptime; saturates after.
    u32::try_from(since_origin_ns() / 1_000_000_000).unwrap_or(u32::MAX)
}

/// Milliseconds since the first call, on the same clock as [`now_secs`] (whole seconds of
/// it are `now_secs()`): the resolver's timers, whose cache expiries the engine compares
/// with `now_secs()`.
pub fn now_millis() -> u64 {
    since_origin_ns() / 1_000_000
}

/// The origin of [`now_secs`] on the kernel's own monotonic clock (what `bpf_ktime_get_ns()`
/// reads): in a time namespace (`unshare --time`), the process's `CLOCK_MONOTONIC` is the
/// kernel's plus the namespace's offset (`/proc/self/timens_offsets`), which is taken off.
pub fn kernel_origin_ns() -> u64 {
    let origin = *ORIGIN.get_or_init(mono_ns);
    let offset = std::fs::read_to_string("/proc/self/timens_offsets")
        .ok()
        .and_then(|t| timens_monotonic_ns(&t))
        .unwrap_or(0);
    // offset may be negative: origin_kernel = origin - offset.
    (i128::from(origin) - i128::from(offset)).clamp(0, i128::from(u64::MAX)) as u64
}

/// A [`mono_ns`] instant on the kernel's own monotonic clock (`bpf_ktime_get_ns()`), for
/// deadlines the XDP program compares: the time namespace's offset taken off.
pub fn to_kernel_ns(mono: u64) -> u64 {
    let origin = *ORIGIN.get_or_init(mono_ns);
    (i128::from(mono) - i128::from(origin) + i128::from(kernel_origin_ns()))
        .clamp(0, i128::from(u64::MAX)) as u64
}

/// The `monotonic` offset of a `/proc/<pid>/timens_offsets` text, in nanoseconds.
fn timens_monotonic_ns(text: &str) -> Option<i64> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        if f.next()? != "monotonic" {
            return None;
        }
        let secs: i64 = f.next()?.parse().ok()?;
        let nanos: i64 = f.next()?.parse().ok()?;
        Some(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
    })
}

/// Seconds since the UNIX epoch, wall clock (TSIG's time signed, RFC 8945 §4.2); 0 when the
/// clock is before 1970.
pub fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
        assert!(now_millis() / 1000 >= u64::from(b));
    }

    #[test]
    fn kernel_origin_gives_the_same_second() {
        let origin = kernel_origin_ns();
        // Outside a time namespace the kernel's clock is ours.
        let k = (mono_ns() - origin) / 1_000_000_000;
        let s = u64::from(now_secs());
        assert!(k == s || k == s + 1, "{k} vs {s}");
    }

    #[test]
    fn timens_offsets_parse() {
        let t = "monotonic           -5         250000000\nboottime            0         0\n";
        assert_eq!(timens_monotonic_ns(t), Some(-4_750_000_000));
        assert_eq!(timens_monotonic_ns("boottime 1 0\n"), None);
    }
}
