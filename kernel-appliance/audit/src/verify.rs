//! The verifier, the checkpoint side file, and `tail`.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::entry::{Entry, GENESIS, MAX_LINE, is_hex64};
use crate::key::{AuditKey, valid_id};
use crate::lines::{Backward, byte_at, end_of_last_line};
use crate::{Error, kind};

/// What [`verify`] found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The log.
    pub path: PathBuf,
    /// Entries that verified, from the first; all of them when `first_bad` is `None`.
    pub entries_verified: u64,
    /// The seq and MAC of the last entry that verified.
    pub last_seq: Option<u64>,
    /// See `last_seq`.
    pub last_mac: Option<String>,
    /// The keys the verified entries are under, in the order the chain used them.
    pub key_ids: Vec<String>,
    /// `key-rotation` entries verified.
    pub rotations: u64,
    /// `checkpoint` entries verified.
    pub checkpoints: u64,
    /// `segment-start` entries verified.
    pub segments: u64,
    /// The seq named by the checkpoint file, when one was given and the log holds it.
    pub checkpoint_file_seq: Option<u64>,
    /// A last line that is not a complete entry: the remains of a write cut short by a
    /// crash. A warning: the log verifies up to the entry before it.
    pub partial_tail: Option<PartialTail>,
    /// The first entry that does not verify; nothing after it is checked.
    pub first_bad: Option<BadEntry>,
}

impl Report {
    /// Whether the log verified (a partial last line allowed).
    pub fn is_ok(&self) -> bool {
        self.first_bad.is_none()
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

/// A partial last line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PartialTail {
    /// Its line number (from 1).
    pub line: u64,
    /// Its offset in the file.
    pub offset: u64,
    /// Its length.
    pub bytes: u64,
    /// Why it is not an entry.
    pub why: String,
}

/// Where the log stops verifying.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BadEntry {
    /// Line number (from 1). For [`Reason::Truncated`], the line after the last.
    pub line: u64,
    /// The entry's seq as written, if the line was readable (for [`Reason::Truncated`], the
    /// seq that is missing).
    pub seq: Option<u64>,
    /// What is wrong.
    pub reason: Reason,
}

impl fmt::Display for BadEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}", self.line)?;
        if let Some(seq) = self.seq {
            write!(f, ", seq {seq}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// Why an entry does not verify, in the order the verifier checks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Reason {
    /// The line is not an entry.
    BadJson {
        /// The parser's complaint.
        why: String,
    },
    /// The entry is under a key the verifier was not given.
    UnknownKey {
        /// The key it names.
        key_id: String,
    },
    /// The MAC is not the entry's MAC under its key: the entry was edited or forged.
    MacMismatch {
        /// The key it names.
        key_id: String,
    },
    /// The entry is under a key no rotation announced.
    UnannouncedKey {
        /// The key it names.
        key_id: String,
        /// The key the chain is under.
        expected: String,
    },
    /// The seq jumps forward: entries are missing (deleted, or moved later).
    SeqGap {
        /// The seq that should be here.
        expected: u64,
        /// The seq that is.
        found: u64,
    },
    /// The seq repeats or goes back: an entry was duplicated or moved earlier.
    SeqBack {
        /// The seq that should be here.
        expected: u64,
        /// The seq that is.
        found: u64,
    },
    /// `prev` is not the previous entry's MAC.
    PrevMismatch,
    /// A key rotation that names no valid key, or a key whose secret does not match the
    /// commitment it announced.
    BadRotation {
        /// What is wrong.
        why: String,
    },
    /// A checkpoint whose count or running hash is not the log's.
    BadCheckpoint {
        /// What is wrong.
        why: String,
    },
    /// The log ends before the seq the checkpoint file names: entries were cut off the end.
    Truncated {
        /// The seq the checkpoint file names.
        checkpoint_seq: u64,
        /// The last seq in the log.
        last_seq: Option<u64>,
    },
    /// The entry at the checkpoint file's seq has another MAC.
    CheckpointMismatch {
        /// The seq the checkpoint file names.
        checkpoint_seq: u64,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::BadJson { why } => write!(f, "not an entry: {why}"),
            Reason::UnknownKey { key_id } => {
                write!(f, "under key {key_id}, which the verifier was not given")
            }
            Reason::MacMismatch { key_id } => write!(
                f,
                "MAC mismatch under key {key_id}: the entry was altered or forged"
            ),
            Reason::UnannouncedKey { key_id, expected } => write!(
                f,
                "under key {key_id}, but the chain is under {expected} and no rotation \
                 announced {key_id}"
            ),
            Reason::SeqGap { expected, found } => write!(
                f,
                "seq {found} where {expected} was expected: {} entries missing (deleted or \
                 reordered)",
                found - expected
            ),
            Reason::SeqBack { expected, found } => write!(
                f,
                "seq {found} where {expected} was expected: an entry duplicated or reordered"
            ),
            Reason::PrevMismatch => {
                write!(
                    f,
                    "prev is not the previous entry's MAC: the chain is broken"
                )
            }
            Reason::BadRotation { why } => write!(f, "bad key rotation: {why}"),
            Reason::BadCheckpoint { why } => write!(f, "bad checkpoint: {why}"),
            Reason::Truncated {
                checkpoint_seq,
                last_seq,
            } => {
                write!(f, "the log ends ")?;
                match last_seq {
                    Some(s) => write!(f, "at seq {s}")?,
                    None => write!(f, "before its first entry")?,
                }
                write!(
                    f,
                    " but the checkpoint file names seq {checkpoint_seq}: entries were cut \
                     off the end"
                )
            }
            Reason::CheckpointMismatch { checkpoint_seq } => write!(
                f,
                "the entry is not the checkpoint the checkpoint file names for seq \
                 {checkpoint_seq} (another MAC)"
            ),
        }
    }
}

/// The latest checkpoint, as kept in `<log>.checkpoint` (one JSON line). Copy it off the
/// box: it is what makes cutting entries off the end of the log detectable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CheckpointFile {
    /// The checkpoint entry's seq.
    pub seq: u64,
    /// Its MAC.
    pub mac: String,
    /// The running hash after it (see the crate docs).
    pub chain_hash: String,
    /// The key the log was under after it.
    pub key_id: String,
}

impl CheckpointFile {
    /// Reads a checkpoint file.
    pub fn read(path: impl AsRef<Path>) -> Result<CheckpointFile, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let bad = |why: String| Error::Checkpoint {
            path: path.to_path_buf(),
            why,
        };
        let cp: CheckpointFile =
            serde_json::from_str(text.trim_end()).map_err(|e| bad(e.to_string()))?;
        if !is_hex64(&cp.mac) {
            return Err(bad("mac is not 64 lowercase hex digits".into()));
        }
        Ok(cp)
    }

    pub(crate) fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("a checkpoint always serializes");
        s.push('\n');
        s
    }
}

/// One step of the running hash: SHA-256 of the previous value (32 bytes) and the entry's
/// MAC (32 bytes).
pub(crate) fn chain_step(chain: &[u8; 32], mac_hex: &str) -> [u8; 32] {
    let mut mac = [0; 32];
    // Callers pass MACs that parsed as 64 hex digits; anything else hashes as zeros.
    let _ = hex::decode_to_slice(mac_hex, &mut mac);
    let mut h = Sha256::new();
    h.update(chain);
    h.update(mac);
    h.finalize().into()
}

/// The `detail` of a checkpoint at `seq`.
pub(crate) fn checkpoint_detail(seq: u64, since: u64, chain: &[u8; 32]) -> Value {
    json!({"entries": seq, "since": since, "chain_hash": hex::encode(chain)})
}

/// Verifies the log at `path` with `keys` (every key the log has been under), and, with
/// `checkpoint` (a `<log>.checkpoint` file, ideally a copy kept elsewhere), that the log
/// was not cut short before that checkpoint. Errors are I/O errors and unusable inputs (a
/// bad checkpoint file, two different keys with one id); what is wrong with the log itself
/// is in the report.
pub fn verify(
    path: impl AsRef<Path>,
    keys: &[AuditKey],
    checkpoint: Option<&Path>,
) -> Result<Report, Error> {
    let path = path.as_ref();
    let mut known: HashMap<&str, &AuditKey> = HashMap::new();
    for k in keys {
        if let Some(other) = known.insert(k.id(), k)
            && other != k
        {
            return Err(Error::BadKey(format!(
                "two different keys have the id {}",
                k.id()
            )));
        }
    }
    let cp = checkpoint.map(CheckpointFile::read).transpose()?;
    let io_err = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(io_err)?);
    let mut report = Report {
        path: path.to_path_buf(),
        entries_verified: 0,
        last_seq: None,
        last_mac: None,
        key_ids: Vec::new(),
        rotations: 0,
        checkpoints: 0,
        segments: 0,
        checkpoint_file_seq: None,
        partial_tail: None,
        first_bad: None,
    };
    let mut chain = Chain {
        known,
        next_seq: 0,
        prev: GENESIS.to_string(),
        key: None,
        hash: [0; 32],
        since: 0,
    };
    let (mut line_no, mut offset) = (0u64, 0u64);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(io_err)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let bad = |seq, reason| {
            Some(BadEntry {
                line: line_no,
                seq,
                reason,
            })
        };
        if buf.last() != Some(&b'\n') {
            if n > MAX_LINE {
                report.first_bad = bad(
                    None,
                    Reason::BadJson {
                        why: format!("longer than {MAX_LINE} bytes"),
                    },
                );
            } else {
                report.partial_tail = Some(PartialTail {
                    line: line_no,
                    offset,
                    bytes: n as u64,
                    why: "no newline".into(),
                });
            }
            break;
        }
        let (e, canonical) = match Entry::parse_line(&buf[..n - 1]) {
            Ok(p) => p,
            Err(why) => {
                if reader.fill_buf().map_err(io_err)?.is_empty() {
                    // The last line: what a crash can leave (zeros where data was lost).
                    report.partial_tail = Some(PartialTail {
                        line: line_no,
                        offset,
                        bytes: n as u64,
                        why,
                    });
                } else {
                    report.first_bad = bad(None, Reason::BadJson { why });
                }
                break;
            }
        };
        if let Err(reason) = chain.check(&e, &canonical) {
            report.first_bad = bad(Some(e.seq), reason);
            break;
        }
        if let Some(cp) = &cp
            && cp.seq == e.seq
        {
            if cp.mac != e.mac {
                report.first_bad = bad(
                    Some(e.seq),
                    Reason::CheckpointMismatch {
                        checkpoint_seq: cp.seq,
                    },
                );
                break;
            }
            report.checkpoint_file_seq = Some(cp.seq);
        }
        match e.kind.as_str() {
            kind::KEY_ROTATION => report.rotations += 1,
            kind::CHECKPOINT => report.checkpoints += 1,
            kind::SEGMENT_START => report.segments += 1,
            _ => {}
        }
        if report.key_ids.last() != Some(&e.key_id) {
            report.key_ids.push(e.key_id.clone());
        }
        report.entries_verified += 1;
        report.last_seq = Some(e.seq);
        report.last_mac = Some(e.mac);
        offset += n as u64;
    }
    if let Some(cp) = &cp
        && report.first_bad.is_none()
        && report.checkpoint_file_seq.is_none()
    {
        report.first_bad = Some(BadEntry {
            line: line_no + 1 - u64::from(report.partial_tail.is_some()),
            seq: Some(chain.next_seq),
            reason: Reason::Truncated {
                checkpoint_seq: cp.seq,
                last_seq: report.last_seq,
            },
        });
    }
    Ok(report)
}

/// What the next entry must link to.
struct Chain<'k> {
    known: HashMap<&'k str, &'k AuditKey>,
    next_seq: u64,
    prev: String,
    /// The key the next entry must be under; `None` before the first entry.
    key: Option<String>,
    hash: [u8; 32],
    since: u64,
}

impl Chain<'_> {
    /// Checks one entry and, if it verifies, moves past it.
    fn check(&mut self, e: &Entry, canonical: &[u8]) -> Result<(), Reason> {
        let Some(key) = self.known.get(e.key_id.as_str()) else {
            return Err(Reason::UnknownKey {
                key_id: e.key_id.clone(),
            });
        };
        if !key.verify(canonical, &e.mac) {
            return Err(Reason::MacMismatch {
                key_id: e.key_id.clone(),
            });
        }
        // A segment start may begin under any key given (it records why the writer could
        // not continue the chain under a key it had).
        if let Some(expected) = &self.key
            && *expected != e.key_id
            && e.kind != kind::SEGMENT_START
        {
            return Err(Reason::UnannouncedKey {
                key_id: e.key_id.clone(),
                expected: expected.clone(),
            });
        }
        if e.seq > self.next_seq {
            return Err(Reason::SeqGap {
                expected: self.next_seq,
                found: e.seq,
            });
        }
        if e.seq < self.next_seq {
            return Err(Reason::SeqBack {
                expected: self.next_seq,
                found: e.seq,
            });
        }
        if e.prev != self.prev {
            return Err(Reason::PrevMismatch);
        }
        let mut next_key = e.key_id.clone();
        match e.kind.as_str() {
            kind::KEY_ROTATION => next_key = self.rotation(e)?,
            kind::CHECKPOINT => self.checkpoint(e)?,
            kind::SEGMENT_START => {
                self.hash = [0; 32];
                self.since = e.seq;
            }
            _ => {}
        }
        self.hash = chain_step(&self.hash, &e.mac);
        self.key = Some(next_key);
        self.next_seq += 1;
        self.prev.clone_from(&e.mac);
        Ok(())
    }

    /// The key a rotation moves to.
    fn rotation(&self, e: &Entry) -> Result<String, Reason> {
        let bad = |why: String| Err(Reason::BadRotation { why });
        let (Some(id), Some(commitment)) = (
            e.detail["new_key_id"].as_str(),
            e.detail["new_key_sha256"].as_str(),
        ) else {
            return bad("new_key_id or new_key_sha256 missing".into());
        };
        if !valid_id(id) || id == e.key_id || !is_hex64(commitment) {
            return bad(format!("{id:?} is not a new key id with a SHA-256"));
        }
        if let Some(k) = self.known.get(id)
            && k.commitment() != commitment
        {
            return bad(format!(
                "the key given as {id} is not the one announced (SHA-256 differs)"
            ));
        }
        Ok(id.to_string())
    }

    fn checkpoint(&self, e: &Entry) -> Result<(), Reason> {
        let want = checkpoint_detail(e.seq, self.since, &self.hash);
        if e.detail != want {
            return Err(Reason::BadCheckpoint {
                why: format!("it records {} where the log gives {want}", e.detail),
            });
        }
        Ok(())
    }
}

/// The last `n` entries of the log at `path`, oldest first, for display (`GET /audit`).
/// Nothing is verified: run [`verify`] for that. A partial last line and lines that are not
/// entries are skipped.
pub fn tail(path: impl AsRef<Path>, n: usize) -> Result<Vec<Entry>, Error> {
    let path = path.as_ref();
    let io_err = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let len = file.metadata().map_err(io_err)?.len();
    let end = if len > 0 && byte_at(&file, len - 1).map_err(io_err)? != b'\n' {
        end_of_last_line(&file, len).map_err(io_err)?
    } else {
        len
    };
    let mut back = Backward::new(&file, end, MAX_LINE);
    let mut out = Vec::with_capacity(n.min(4096));
    while out.len() < n {
        let Some((_, line)) = back.prev_line().map_err(io_err)? else {
            break;
        };
        if let Ok((e, _)) = Entry::parse_line(&line) {
            out.push(e);
        }
    }
    out.reverse();
    Ok(out)
}
