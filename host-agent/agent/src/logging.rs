//! The agent's log lines: on stderr (the journal under systemd), each with the Unix time
//! to the millisecond, so that the lines of several nodes line up.

/// One log line, prefixed with its source (an instance, `health`, an anycast section).
pub fn log(name: &str, msg: std::fmt::Arguments<'_>) {
    // Seconds.milliseconds of the Unix time: lines of several nodes line up.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    eprintln!(
        "{}.{:03} skua-agent [{name}]: {msg}",
        t.as_secs(),
        t.subsec_millis()
    );
}
