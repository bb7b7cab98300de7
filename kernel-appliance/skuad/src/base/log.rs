//! Minimal stderr logging with Unbound-style verbosity (0 errors only, 1 operational,
//! 2+ details). Lines carry a UNIX timestamp and a level so that journald and humans can
//! read them; no global allocator churn beyond formatting.

use std::fmt::Arguments;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static VERBOSITY: AtomicU8 = AtomicU8::new(1);

/// Repeated errors of one kind (accept failures, typically out of descriptors) are logged
/// at most this often, with their count.
pub const ERROR_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Sets the level.
pub fn set_verbosity(v: u8) {
    VERBOSITY.store(v, Ordering::Relaxed);
}

fn emit(level: &str, min: u8, args: Arguments<'_>) {
    if VERBOSITY.load(Ordering::Relaxed) < min {
        return;
    }
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    eprintln!(
        "[{}.{:03}] skuad {level}: {args}",
        t.as_secs(),
        t.subsec_millis()
    );
}

/// Always shown.
pub fn error(args: Arguments<'_>) {
    emit("error", 0, args);
}

/// Shown at verbosity ≥ 1 (the default).
pub fn warn(args: Arguments<'_>) {
    emit("warning", 1, args);
}

/// Shown at verbosity ≥ 1.
pub fn info(args: Arguments<'_>) {
    emit("info", 1, args);
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
