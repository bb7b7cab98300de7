//! Minimal stderr logging with Unbound-style verbosity (0 errors only, 1 operational,
//! 2+ details).
//!
//! On a terminal or a file a line reads `2026-11-25T07:30:12.345Z skuad info: ...`: an
//! RFC 3339 timestamp in UTC with milliseconds, then the level. Under journald (stderr is
//! the stream named by `$JOURNAL_STREAM`, systemd.exec(5)) the journal stamps each line
//! itself, so the timestamp is left out and the line starts with its syslog priority
//! (`<3>` error, `<4>` warning, `<6>` info, sd-daemon(3)), which journald turns into the
//! entry's priority (`journalctl -p warning` works).

use std::fmt::Arguments;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::SystemTime;

static VERBOSITY: AtomicU8 = AtomicU8::new(1);

/// Repeated errors of one kind (accept failures, typically out of descriptors) are logged
/// at most this often, with their count.
pub const ERROR_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Sets the level.
pub fn set_verbosity(v: u8) {
    VERBOSITY.store(v, Ordering::Relaxed);
}

/// Whether stderr is the journal's stream: `$JOURNAL_STREAM` is `DEVICE:INODE` of it, and
/// a child that inherited the variable but not the stream must not trust it, so the pair is
/// compared with stderr's own.
fn stderr_is_journal() -> bool {
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = v.to_str().and_then(|v| v.split_once(':')) else {
        return false;
    };
    let meta = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata());
    match meta {
        Ok(m) => dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino()),
        Err(_) => false,
    }
}

fn journal() -> bool {
    static JOURNAL: OnceLock<bool> = OnceLock::new();
    *JOURNAL.get_or_init(stderr_is_journal)
}

/// One log line as written to stderr (`prio` is the syslog priority).
fn format_line(
    journal: bool,
    now: SystemTime,
    prio: u8,
    level: &str,
    args: Arguments<'_>,
) -> String {
    if journal {
        format!("<{prio}>skuad {level}: {args}")
    } else {
        format!("{} skuad {level}: {args}", skua_audit::rfc3339_millis(now))
    }
}

fn emit(level: &str, prio: u8, min: u8, args: Arguments<'_>) {
    if VERBOSITY.load(Ordering::Relaxed) < min {
        return;
    }
    eprintln!(
        "{}",
        format_line(journal(), SystemTime::now(), prio, level, args)
    );
}

/// Always shown.
pub fn error(args: Arguments<'_>) {
    emit("error", 3, 0, args);
}

/// Shown at verbosity ≥ 1 (the default).
pub fn warn(args: Arguments<'_>) {
    emit("warning", 4, 1, args);
}

/// Shown at verbosity ≥ 1.
pub fn info(args: Arguments<'_>) {
    emit("info", 6, 1, args);
}

/// "name type" of a query, for logs.
pub fn describe_query(q: &[u8]) -> String {
    match skua_engine::wire::Query::parse(q) {
        Ok(q) => match skua_engine::name::WireName::from_wire(q.qname()) {
            Ok(n) => format!("{n} {}", skua_engine::text::rtype_to_string(q.qtype)),
            Err(_) => "<bad name>".into(),
        },
        Err(_) => "<unparsed query>".into(),
    }
}

/// Forwards the `log` crate's records (aya, skua-xdp) to this logger.
struct Bridge;

impl log::Log for Bridge {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }

    fn log(&self, r: &log::Record<'_>) {
        match r.level() {
            log::Level::Error => error(*r.args()),
            log::Level::Warn => warn(*r.args()),
            log::Level::Info => info(*r.args()),
            _ => {}
        }
    }

    fn flush(&self) {}
}

/// Installs the bridge (once; later calls are no-ops).
pub fn install_bridge() {
    static BRIDGE: Bridge = Bridge;
    if log::set_logger(&BRIDGE).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// An error and its sources, `outer: inner: innermost` (so errno is not lost).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let cs = c.to_string();
        if !s.ends_with(&cs) {
            s.push_str(": ");
            s.push_str(&cs);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn lines_carry_rfc3339_or_a_priority() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_000_000_123);
        assert_eq!(
            format_line(false, t, 6, "info", format_args!("loaded {} records", 3)),
            "2026-11-18T11:06:40.123Z skuad info: loaded 3 records"
        );
        assert_eq!(
            format_line(true, t, 4, "warning", format_args!("x")),
            "<4>skuad warning: x"
        );
    }

    #[test]
    fn journal_stream_must_match_stderr() {
        // The test harness's stderr is not the journal whatever the environment says.
        if std::env::var_os("JOURNAL_STREAM").is_none() {
            assert!(!stderr_is_journal());
        }
    }
}
