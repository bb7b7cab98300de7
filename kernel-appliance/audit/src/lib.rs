//! `skua-audit`: a tamper-evident audit log for skuad's state changes.
//!
//! Every state change of the daemon (an API write, a reload, an authentication failure, a
//! start or stop) is appended to a file as one line of JSON. Each entry carries an
//! HMAC-SHA256 over its own fields *and the previous entry's MAC*, so the entries form a
//! chain: editing, deleting, reordering, duplicating or inserting an entry breaks it at
//! that entry, and [`verify`] names the first entry that does not verify (line, seq, why).
//!
//! ```text
//!  AuditLog::open ── recover the tail (cut a partial line, check the last MAC) ──┐
//!  append / rotate / checkpoint ── one line, one write(2), fdatasync ──▶ audit.log ┤
//!                     └── every N entries: checkpoint entry + audit.log.checkpoint ┤
//!  verify(log, keys, checkpoint file) ──▶ Report { entries_verified, first_bad, .. } ◀┘
//! ```
//!
//! # Entry format
//!
//! One line per entry, compact JSON, members in exactly this order, `mac` last:
//!
//! ```text
//! {"seq":0,"ts":"2026-05-01T12:00:00.123Z","kind":"start","actor":"system","source":null,
//!  "detail":{"version":"0.1.0"},"key_id":"66687aadf862bd77","prev":"000…000","mac":"9c1f…"}
//! ```
//!
//! - `seq` counts from 0; `prev` is the previous entry's `mac` ([`GENESIS`], 64 zeros, for
//!   the first); `ts` is RFC 3339 UTC with milliseconds; `source` is an IP address or null;
//!   `detail` is an object whose keys are written sorted.
//! - `mac` = HMAC-SHA256(key `key_id`, *canonical bytes*), 64 lowercase hex digits. The
//!   canonical bytes are the line without its `mac` member, exactly as written: the line
//!   minus its newline, with the final `,"mac":"<64 hex>"}` (74 bytes) replaced by `}`. A
//!   verifier works on those bytes and never re-serializes JSON.
//!
//! Kinds written by this crate ([`kind`]):
//! - `key-rotation` — under the *old* key; `detail` = `{"new_key_id", "new_key_sha256"
//!   (SHA-256 of the new secret), "reason"}`. The entries after it must be under the new key.
//! - `checkpoint` — `detail` = `{"entries": its seq, "since", "chain_hash"}` where
//!   `chain_hash` = H(`since`..seq−1), H(∅) = 32 zero bytes, H(..i) = SHA-256(H(..i−1) ‖
//!   mac_i as 32 bytes), and `since` is 0 or the seq of the last `segment-start`. The
//!   latest checkpoint's seq and MAC are also written to `<log>.checkpoint` (atomic rename).
//! - `recovered` — written by [`AuditLog::open`] after cutting off a partial last line
//!   (`dropped_bytes`, `dropped_sha256`, `reason`).
//! - `segment-start` — written by `open` when the last entry did not verify and the caller
//!   asked to go on anyway ([`OpenOptions::new_segment`]); may be under any key given to the
//!   verifier, and restarts the running hash.
//!
//! # What is detected, and what is not
//!
//! Without the key, nobody can edit, forge, delete, reorder or duplicate entries without
//! [`verify`] reporting the first entry affected. Not detectable:
//! - anything done by someone holding the key: it can rewrite the whole log;
//! - cutting entries off the end: the chain cannot show what is missing after its last
//!   entry. Cutting before the latest checkpoint is detected when the verifier is given
//!   the checkpoint file, but a local attacker can replace that file too (with an older
//!   checkpoint, which is in the log): ship checkpoints off the box. Entries after the
//!   latest checkpoint are only protected by an external copy;
//! - a last line that is not an entry is taken for the remains of a crash (a warning,
//!   [`Report::partial_tail`]), so replacing the last entry by garbage looks like a crash
//!   that lost it.
//!
//! # Durability
//!
//! `append` writes the whole line with one `write(2)` to an `O_APPEND` file and calls
//! `fdatasync` before it returns (or per batch, with the bound in [`FsyncPolicy::Batch`]).
//! A crash leaves complete lines and at most one partial line, which `open` cuts off and
//! records. A failed `fdatasync` makes the log refuse further appends (the kernel may have
//! dropped the data): reopen it.
//!
//! What this crate does not do: ship entries or checkpoints anywhere (the daemon or an
//! agent does that), rotate files by size, redact secrets from `detail` (callers must not
//! put secrets there), or keep secrets out of memory (keys are plain `Vec<u8>`). It has no
//! `unsafe` code and panics on no input.

#![forbid(unsafe_code)]

mod entry;
mod key;
mod lines;
mod log;
mod time;
mod verify;

use std::path::PathBuf;

pub use entry::{Entry, GENESIS, MAX_LINE};
pub use key::AuditKey;
pub use log::{AuditLog, FsyncPolicy, OpenOptions, Opened, Recovered};
/// The JSON crate of [`Entry::detail`] and [`AuditLog::append`]'s `detail`.
pub use serde_json;
pub use time::rfc3339_millis;
pub use verify::{BadEntry, CheckpointFile, PartialTail, Reason, Report, tail, verify};

/// Entry kinds. The daemon's are suggestions; the reserved ones are written by this crate.
pub mod kind {
    /// The daemon started.
    pub const START: &str = "start";
    /// The daemon is stopping.
    pub const STOP: &str = "stop";
    /// The configuration was reloaded.
    pub const RELOAD: &str = "reload";
    /// A write through the REST API.
    pub const API_WRITE: &str = "api-write";
    /// A request that failed authentication.
    pub const AUTH_FAILURE: &str = "auth-failure";
    /// A zone transfer served to a secondary (AXFR, IXFR).
    pub const XFR_OUT: &str = "xfr-out";
    /// A zone transfer request or a NOTIFY refused (TSIG, `provide-xfr:`,
    /// `allow-notify:`), aggregated per source.
    pub const XFR_REFUSED: &str = "xfr-refused";
    /// A zone transfer received from a primary and served (skuad as a secondary).
    pub const XFR_IN: &str = "xfr-in";
    /// A secondary zone's refresh or transfer that failed (no answer, refused, bad TSIG,
    /// a transfer that does not apply), aggregated per primary.
    pub const XFR_IN_FAILED: &str = "xfr-in-failed";
    /// A secondary zone's copy expired (RFC 1035 §3.3.13): it is no longer served.
    pub const XFR_EXPIRED: &str = "xfr-expired";
    /// This node's configuration and API data sent to a follower (`sync:`), once per new
    /// version and follower.
    pub const SYNC_OUT: &str = "sync-out";
    /// A source's configuration and API data received and served (this node follows it).
    pub const SYNC_IN: &str = "sync-in";
    /// A source's configuration or API data that could not be taken (the old ones serve),
    /// once per version and source.
    pub const SYNC_IN_FAILED: &str = "sync-in-failed";
    /// A certificate obtained over ACME, written and put in force.
    pub const TLS_ISSUED: &str = "tls-issued";
    /// An ACME order that failed (the certificate in force keeps serving).
    pub const TLS_FAILED: &str = "tls-failed";
    /// An ACME order asked for through the API.
    pub const TLS_RENEW_REQUESTED: &str = "tls-renew-requested";
    /// Another certificate put in force for the encrypted listeners (a reload after a
    /// renewal or an operator's new files): new handshakes get it from now on.
    pub const TLS_SWAPPED: &str = "tls-swapped";

    /// Reserved: the chain moves to another key.
    pub const KEY_ROTATION: &str = "key-rotation";
    /// Reserved: a checkpoint.
    pub const CHECKPOINT: &str = "checkpoint";
    /// Reserved: a partial line was cut off when the log was opened.
    pub const RECOVERED: &str = "recovered";
    /// Reserved: the log goes on after an entry that did not verify.
    pub const SEGMENT_START: &str = "segment-start";

    /// Whether `kind` is written by this crate only.
    pub fn is_reserved(kind: &str) -> bool {
        matches!(kind, KEY_ROTATION | CHECKPOINT | RECOVERED | SEGMENT_START)
    }

    /// Whether `kind` is 1 to 64 characters of `a-z 0-9 -`.
    pub fn valid(kind: &str) -> bool {
        (1..=64).contains(&kind.len())
            && kind
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    }
}

/// Errors of the writer, of key loading, and of the verifier's inputs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("I/O error on {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Another process has the log open for appending.
    #[error("Audit log {} is open in another process", path.display())]
    Locked {
        /// The log.
        path: PathBuf,
    },
    /// The log's last entry does not verify under the keys given.
    #[error(
        "Audit log {} does not end with an entry that verifies ({problem}); refusing to append \
         (give the key it is under, or open with a new segment)",
        path.display()
    )]
    TailUnverified {
        /// The log.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// An earlier failure left the file in an unknown state.
    #[error("Audit log unusable after an earlier failure ({why}); reopen it")]
    Poisoned {
        /// The failure.
        why: String,
    },
    /// [`AuditLog::append`] wrote the entry, but the checkpoint after it failed.
    #[error("Audit entry {seq} was written, but the checkpoint after it failed")]
    CheckpointFailed {
        /// The entry's seq.
        seq: u64,
        /// Why the checkpoint failed.
        #[source]
        source: Box<Error>,
    },
    /// An entry that cannot be appended.
    #[error("Bad audit entry: {0}")]
    BadEntry(String),
    /// An unusable key.
    #[error("Bad audit key: {0}")]
    BadKey(String),
    /// A key file that cannot be used.
    #[error("Bad audit key file {}: {why}", path.display())]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A key environment variable that cannot be used.
    #[error("Bad audit key in ${var}: {why}")]
    KeyEnv {
        /// The variable.
        var: String,
        /// What is wrong.
        why: String,
    },
    /// A checkpoint file that cannot be used.
    #[error("Bad checkpoint file {}: {why}", path.display())]
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}
