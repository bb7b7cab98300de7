//! The writer: open (with crash recovery), append, rotate, checkpoint.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::entry::{Entry, GENESIS, MAX_LINE, is_hex64};
use crate::key::AuditKey;
use crate::lines::{Backward, byte_at, end_of_last_line};
use crate::time::rfc3339_millis;
use crate::verify::{CheckpointFile, chain_step, checkpoint_detail};
use crate::{Error, kind};

/// When appended entries reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FsyncPolicy {
    /// `fdatasync` after every entry, before `append` returns (the default).
    EveryEntry,
    /// `fdatasync` once `max_entries` entries are waiting, and from a background thread
    /// every `max_delay`. An entry whose `append` returned is lost by a power failure only
    /// if fewer than `max_entries` entries were waiting and it was written less than
    /// `max_delay` (plus one `fdatasync`) before. Checkpoints, rotations and the entries
    /// that `open` writes are always synced at once.
    Batch {
        /// Sync when this many entries are waiting (at least 1).
        max_entries: u32,
        /// Sync at least this often while entries are waiting.
        max_delay: Duration,
    },
}

/// How [`AuditLog::open`] opens a log.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    fsync: FsyncPolicy,
    checkpoint_every: u64,
    previous_keys: Vec<AuditKey>,
    new_segment: Option<String>,
    checkpoint_file: bool,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions {
            fsync: FsyncPolicy::EveryEntry,
            checkpoint_every: 1000,
            previous_keys: Vec::new(),
            new_segment: None,
            checkpoint_file: true,
        }
    }
}

impl OpenOptions {
    /// Per-entry `fdatasync`, a checkpoint every 1000 entries, `<log>.checkpoint` kept.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// When entries reach the disk (default [`FsyncPolicy::EveryEntry`]).
    pub fn fsync(mut self, policy: FsyncPolicy) -> OpenOptions {
        self.fsync = policy;
        self
    }

    /// Write a checkpoint after every `n` other entries (0: only on demand). Reopening reads
    /// the log back to its last checkpoint, so 0 makes `open` read the whole log.
    pub fn checkpoint_every(mut self, n: u64) -> OpenOptions {
        self.checkpoint_every = n;
        self
    }

    /// A key the log may have used before the current one. When the log's last entry is
    /// under it (or announces it), `open` verifies that entry with it and then rotates to
    /// the current key in the chain.
    pub fn previous_key(mut self, key: AuditKey) -> OpenOptions {
        self.previous_keys.push(key);
        self
    }

    /// If the log's last entry does not verify, start a new segment instead of failing:
    /// a `segment-start` entry recording `reason` and what was wrong. The damage stays in
    /// the file and the verifier still reports it.
    pub fn new_segment(mut self, reason: impl Into<String>) -> OpenOptions {
        self.new_segment = Some(reason.into());
        self
    }

    /// Whether to keep the latest checkpoint in `<log>.checkpoint` (default true).
    pub fn checkpoint_file(mut self, keep: bool) -> OpenOptions {
        self.checkpoint_file = keep;
        self
    }
}

/// What [`AuditLog::open`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Opened {
    /// A partial last line was cut off and a `recovered` entry written.
    pub recovered: Option<Recovered>,
    /// The chain was under this key; `open` rotated to the current key.
    pub rotated_from: Option<String>,
    /// The last entry did not verify (why); `open` started a new segment.
    pub new_segment: Option<String>,
    /// The seq the next entry gets.
    pub next_seq: u64,
    /// The log's mode allowed group or others in (an older version created it 0644):
    /// `open` set it to 0600; this was the old mode.
    pub tightened_from: Option<u32>,
}

/// A partial line that [`AuditLog::open`] cut off the end of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovered {
    /// Where it started, which is the log's length now.
    pub offset: u64,
    /// How long it was.
    pub dropped_bytes: u64,
    /// Why it was taken for the remains of an interrupted write.
    pub reason: String,
    /// The seq of the `recovered` entry that records it.
    pub seq: u64,
}

/// An append-only, HMAC-chained audit log, shared by reference between threads.
///
/// Dropping it syncs what is waiting and stops the background sync thread.
pub struct AuditLog {
    shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
    opened: Opened,
    path: PathBuf,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the background sync thread when the log closes.
    wake: Condvar,
}

struct State {
    file: File,
    path: PathBuf,
    /// Length of the log: everything written, all of it complete lines.
    len: u64,
    next_seq: u64,
    prev: String,
    key: AuditKey,
    /// Running hash over the MACs since `chain_since` (see `verify::chain_step`).
    chain: [u8; 32],
    chain_since: u64,
    /// Entries (checkpoints not counted) since the last checkpoint.
    since_checkpoint: u64,
    checkpoint_every: u64,
    fsync: FsyncPolicy,
    unsynced: u32,
    side_file: Option<PathBuf>,
    /// Set when the file's state is no longer known (a failed fsync or undo).
    poisoned: Option<String>,
    closing: bool,
}

impl AuditLog {
    /// Opens the log at `path` for appending, creating it if needed, and takes an exclusive
    /// `flock` on it (a second writer gets [`Error::Locked`]).
    ///
    /// An existing log is recovered from its tail: a last line that is not a complete entry
    /// (no newline, or not an entry) is the remains of an interrupted write; it is cut off
    /// and a `recovered` entry records its length and SHA-256. The last entry must then
    /// verify under `key` or a [`OpenOptions::previous_key`], else [`Error::TailUnverified`]
    /// unless [`OpenOptions::new_segment`] was given. If the chain is under another known
    /// key, a `key-rotation` entry moves it to `key`.
    pub fn open(
        path: impl AsRef<Path>,
        key: AuditKey,
        opts: OpenOptions,
    ) -> Result<AuditLog, Error> {
        let path = path.as_ref().to_path_buf();
        let io_err = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let existed = path.exists();
        // Mode 0600: the log names clients, tokens and every change. Never through a
        // symbolic link: whoever can plant one must not choose what the log overwrites.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io_err)?;
        let mode = file.metadata().map_err(io_err)?.permissions().mode() & 0o777;
        let tightened_from = if mode & 0o077 != 0 {
            // A log created by an older version (0644): made private now.
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(io_err)?;
            Some(mode)
        } else {
            None
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked { path }),
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(e)),
        }
        if !existed {
            sync_dir(&path).map_err(io_err)?;
        }
        // Found now, cut only once it is certain that the log will be appended to.
        let cut = find_partial_line(&file).map_err(io_err)?;
        let len = cut
            .as_ref()
            .map_or(file.metadata().map_err(io_err)?.len(), |c| c.offset);

        let mut known: HashMap<String, AuditKey> = HashMap::new();
        for k in opts.previous_keys.iter().chain([&key]) {
            known.insert(k.id().to_string(), k.clone());
        }
        let tail = read_tail(&file, len, &known).map_err(io_err)?;
        let side_file = opts.checkpoint_file.then(|| side_path(&path));
        let (checkpoint_every, fsync) = (opts.checkpoint_every, opts.fsync);
        let state_path = path.clone();
        let fresh = move |key: AuditKey, seq: u64, prev: String| State {
            file,
            path: state_path,
            len,
            next_seq: seq,
            prev,
            key,
            chain: [0; 32],
            chain_since: seq,
            since_checkpoint: 0,
            checkpoint_every,
            fsync,
            unsynced: 0,
            side_file,
            poisoned: None,
            closing: false,
        };
        let mut opened = Opened {
            tightened_from,
            ..Opened::default()
        };
        let mut segment = None;
        let mut st = match tail {
            Tail::Empty => fresh(key.clone(), 0, GENESIS.to_string()),
            Tail::Good(t) => State {
                chain: t.chain,
                chain_since: t.chain_since,
                since_checkpoint: t.since_checkpoint,
                ..fresh(known[&t.next_key].clone(), t.seq + 1, t.mac)
            },
            Tail::Bad { problem, seq, mac } => {
                let Some(reason) = &opts.new_segment else {
                    return Err(Error::TailUnverified { path, problem });
                };
                segment = Some(json!({"reason": reason, "problem": problem}));
                opened.new_segment = Some(problem);
                let seq = seq.map_or(0, |s| s + 1);
                let prev = mac.filter(|m| is_hex64(m)).unwrap_or(GENESIS.to_string());
                fresh(key.clone(), seq, prev)
            }
        };
        if let Some(c) = &cut {
            st.file.set_len(c.offset).map_err(io_err)?;
            st.file.sync_all().map_err(io_err)?;
        }
        if let Some(detail) = segment {
            st.write_entry(kind::SEGMENT_START, "system", None, detail)?;
        }
        if let Some(c) = cut {
            let seq = st.write_entry(
                kind::RECOVERED,
                "system",
                None,
                json!({
                    "dropped_bytes": c.dropped_bytes,
                    "dropped_sha256": c.sha256,
                    "reason": c.reason,
                }),
            )?;
            opened.recovered = Some(Recovered {
                offset: c.offset,
                dropped_bytes: c.dropped_bytes,
                reason: c.reason,
                seq,
            });
        }
        if st.key.id() != key.id() {
            opened.rotated_from = Some(st.key.id().to_string());
            st.rotate(key, "the key changed while the log was closed")?;
        }
        st.sync()?;
        opened.next_seq = st.next_seq;

        let shared = Arc::new(Shared {
            state: Mutex::new(st),
            wake: Condvar::new(),
        });
        let flusher = match opts.fsync {
            FsyncPolicy::EveryEntry => None,
            FsyncPolicy::Batch { max_delay, .. } => {
                let shared = Arc::clone(&shared);
                Some(std::thread::spawn(move || flush_loop(&shared, max_delay)))
            }
        };
        Ok(AuditLog {
            shared,
            flusher,
            opened,
            path,
        })
    }

    /// Appends an entry and returns its seq once it is written (and, with
    /// [`FsyncPolicy::EveryEntry`], synced). `kind` is 1 to 64 characters of `a-z 0-9 -`
    /// and not one of the kinds this crate writes itself ([`kind::is_reserved`]); `actor` is
    /// not empty; `detail` is a JSON object. May write a checkpoint after the entry: if that
    /// fails, the error is [`Error::CheckpointFailed`], which names the entry's seq: the entry
    /// was written. A checkpoint entry that could not be written is tried again at the next
    /// append; a checkpoint file that could not be updated, at the next checkpoint.
    pub fn append(
        &self,
        kind: &str,
        actor: &str,
        source: Option<IpAddr>,
        detail: Value,
    ) -> Result<u64, Error> {
        if !kind::valid(kind) || kind::is_reserved(kind) {
            return Err(Error::BadEntry(format!(
                "kind {kind:?} is reserved or not 1 to 64 characters of a-z 0-9 -"
            )));
        }
        if actor.is_empty() {
            return Err(Error::BadEntry("the actor is empty".into()));
        }
        if !detail.is_object() {
            return Err(Error::BadEntry("detail is not a JSON object".into()));
        }
        let mut st = self.lock()?;
        let seq = st.write_entry(kind, actor, source, detail)?;
        st.maybe_sync()?;
        if st.checkpoint_every > 0 && st.since_checkpoint >= st.checkpoint_every {
            st.checkpoint().map_err(|e| Error::CheckpointFailed {
                seq,
                source: Box::new(e),
            })?;
        }
        Ok(seq)
    }

    /// Rotates to `new_key`: appends a `key-rotation` entry under the current key naming the
    /// new key's id and commitment; the entries after it are under `new_key`.
    pub fn rotate(&self, new_key: AuditKey) -> Result<u64, Error> {
        let mut st = self.lock()?;
        if new_key.id() == st.key.id() {
            return Err(Error::BadEntry(format!(
                "the log already uses key {}",
                new_key.id()
            )));
        }
        let seq = st.rotate(new_key, "requested")?;
        st.sync()?;
        Ok(seq)
    }

    /// Appends a checkpoint now, syncs, and updates `<log>.checkpoint`.
    pub fn checkpoint(&self) -> Result<u64, Error> {
        self.lock()?.checkpoint()
    }

    /// Syncs the entries that are waiting ([`FsyncPolicy::Batch`]).
    pub fn sync(&self) -> Result<(), Error> {
        self.lock()?.sync()
    }

    /// Entries written but not yet synced.
    pub fn unsynced(&self) -> Result<u32, Error> {
        Ok(self.lock()?.unsynced)
    }

    /// The seq the next entry gets.
    pub fn next_seq(&self) -> Result<u64, Error> {
        Ok(self.lock()?.next_seq)
    }

    /// The id of the key entries are written under now.
    pub fn key_id(&self) -> Result<String, Error> {
        Ok(self.lock()?.key.id().to_string())
    }

    /// What `open` found and did.
    pub fn opened(&self) -> &Opened {
        &self.opened
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, Error> {
        let st = self.shared.state.lock().map_err(|_| Error::Poisoned {
            why: "a thread panicked while appending".into(),
        })?;
        match &st.poisoned {
            Some(why) => Err(Error::Poisoned { why: why.clone() }),
            None => Ok(st),
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if let Ok(mut st) = self.shared.state.lock() {
            st.closing = true;
            if st.poisoned.is_none() {
                // Nowhere to report a failure; the next open recovers from the tail.
                let _ = st.sync();
            }
        }
        self.shared.wake.notify_all();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
    }
}

fn flush_loop(shared: &Shared, period: Duration) {
    let Ok(mut st) = shared.state.lock() else {
        return;
    };
    loop {
        let deadline = Instant::now() + period;
        while !st.closing && Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            st = match shared.wake.wait_timeout(st, left) {
                Ok((st, _)) => st,
                Err(_) => return,
            };
        }
        if st.closing {
            return;
        }
        if st.poisoned.is_none() && st.unsynced > 0 {
            // A failure poisons the log; append reports it.
            let _ = st.sync();
        }
    }
}

impl State {
    /// Writes one entry under the current key; does not sync.
    fn write_entry(
        &mut self,
        kind: &str,
        actor: &str,
        source: Option<IpAddr>,
        detail: Value,
    ) -> Result<u64, Error> {
        if let Some(why) = &self.poisoned {
            return Err(Error::Poisoned { why: why.clone() });
        }
        let mut e = Entry {
            seq: self.next_seq,
            ts: rfc3339_millis(SystemTime::now()),
            kind: kind.to_string(),
            actor: actor.to_string(),
            source,
            detail,
            key_id: String::new(),
            prev: self.prev.clone(),
            mac: String::new(),
        };
        e.seal(&self.key);
        let mut line = e.to_line().into_bytes();
        line.push(b'\n');
        if line.len() > MAX_LINE {
            return Err(Error::BadEntry(format!(
                "the entry is {} bytes, more than {MAX_LINE}",
                line.len()
            )));
        }
        // One write of the whole line to an O_APPEND file: after a crash the log ends with
        // complete lines or one partial line, which the next open cuts off.
        if let Err(e) = self.file.write_all(&line) {
            // Undo a partial line now rather than leave the next append behind it.
            if let Err(undo) = self.file.set_len(self.len) {
                self.poisoned = Some(format!("a failed write could not be undone: {undo}"));
            }
            return Err(Error::Io {
                path: self.path.clone(),
                source: e,
            });
        }
        self.len += line.len() as u64;
        self.next_seq += 1;
        if kind == kind::SEGMENT_START {
            self.chain = [0; 32];
            self.chain_since = e.seq;
        }
        self.chain = chain_step(&self.chain, &e.mac);
        self.prev = e.mac;
        if kind != kind::CHECKPOINT {
            self.since_checkpoint += 1;
        }
        self.unsynced = self.unsynced.saturating_add(1);
        Ok(e.seq)
    }

    fn rotate(&mut self, new_key: AuditKey, reason: &str) -> Result<u64, Error> {
        let seq = self.write_entry(
            kind::KEY_ROTATION,
            "system",
            None,
            json!({
                "new_key_id": new_key.id(),
                "new_key_sha256": new_key.commitment(),
                "reason": reason,
            }),
        )?;
        self.key = new_key;
        Ok(seq)
    }

    fn checkpoint(&mut self) -> Result<u64, Error> {
        let detail = checkpoint_detail(self.next_seq, self.chain_since, &self.chain);
        let seq = self.write_entry(kind::CHECKPOINT, "system", None, detail)?;
        self.since_checkpoint = 0;
        self.sync()?;
        if let Some(side) = &self.side_file {
            let cp = CheckpointFile {
                seq,
                mac: self.prev.clone(),
                chain_hash: hex::encode(self.chain),
                key_id: self.key.id().to_string(),
            };
            write_atomically(side, &cp.to_line()).map_err(|source| Error::Io {
                path: side.clone(),
                source,
            })?;
        }
        Ok(seq)
    }

    fn maybe_sync(&mut self) -> Result<(), Error> {
        match self.fsync {
            FsyncPolicy::EveryEntry => self.sync(),
            FsyncPolicy::Batch { max_entries, .. } if self.unsynced >= max_entries.max(1) => {
                self.sync()
            }
            FsyncPolicy::Batch { .. } => Ok(()),
        }
    }

    fn sync(&mut self) -> Result<(), Error> {
        if self.unsynced == 0 {
            return Ok(());
        }
        if let Err(e) = self.file.sync_data() {
            // After a failed fsync Linux may have dropped the dirty pages: what is on disk
            // is unknown, so stop here; reopening checks the tail.
            self.poisoned = Some(format!("fdatasync failed: {e}"));
            return Err(Error::Poisoned {
                why: format!("fdatasync failed: {e}"),
            });
        }
        self.unsynced = 0;
        Ok(())
    }
}

/// `<log>.checkpoint`.
pub(crate) fn side_path(log: &Path) -> PathBuf {
    let mut p = log.as_os_str().to_owned();
    p.push(".checkpoint");
    PathBuf::from(p)
}

/// A partial last line found at open.
struct Cut {
    offset: u64,
    dropped_bytes: u64,
    sha256: String,
    reason: String,
}

/// A last line that is not a complete entry: no newline, or not an entry at all (a crash
/// can leave zeros where the data did not reach the disk).
fn find_partial_line(file: &File) -> io::Result<Option<Cut>> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    let (offset, reason) = if byte_at(file, len - 1)? != b'\n' {
        (
            end_of_last_line(file, len)?,
            "the last line has no newline".to_string(),
        )
    } else {
        let offset = end_of_last_line(file, len - 1)?;
        if len - offset > MAX_LINE as u64 {
            (
                offset,
                format!("the last line is longer than {MAX_LINE} bytes"),
            )
        } else {
            let mut line = vec![0; (len - 1 - offset) as usize];
            file.read_exact_at(&mut line, offset)?;
            match Entry::parse_line(&line) {
                Ok(_) => return Ok(None),
                Err(why) => (offset, format!("the last line is not an entry: {why}")),
            }
        }
    };
    let mut hash = Sha256::new();
    let mut at = offset;
    let mut buf = vec![0; 64 * 1024];
    while at < len {
        let n = buf
            .len()
            .min(usize::try_from(len - at).unwrap_or(buf.len()));
        file.read_exact_at(&mut buf[..n], at)?;
        hash.update(&buf[..n]);
        at += n as u64;
    }
    Ok(Some(Cut {
        offset,
        dropped_bytes: len - offset,
        sha256: hex::encode(hash.finalize()),
        reason,
    }))
}

enum Tail {
    Empty,
    Good(GoodTail),
    Bad {
        problem: String,
        seq: Option<u64>,
        mac: Option<String>,
    },
}

struct GoodTail {
    seq: u64,
    mac: String,
    /// The key the next entry must be under.
    next_key: String,
    chain: [u8; 32],
    chain_since: u64,
    since_checkpoint: u64,
}

/// Checks the last entry and recovers the running hash by reading back to the last
/// checkpoint (or segment start, or the start of the file).
fn read_tail(file: &File, len: u64, known: &HashMap<String, AuditKey>) -> io::Result<Tail> {
    let mut back = Backward::new(file, len, MAX_LINE);
    let Some((_, line)) = back.prev_line()? else {
        return Ok(Tail::Empty);
    };
    let (last, canonical) = match Entry::parse_line(&line) {
        Ok(p) => p,
        Err(why) => {
            return Ok(Tail::Bad {
                problem: format!("the last line is not an entry: {why}"),
                seq: None,
                mac: None,
            });
        }
    };
    let (last_seq, last_mac) = (last.seq, last.mac.clone());
    let bad = |problem: String| Tail::Bad {
        problem,
        seq: Some(last_seq),
        mac: Some(last_mac.clone()),
    };
    let Some(key) = known.get(&last.key_id) else {
        return Ok(bad(format!(
            "the last entry (seq {}) is under key {}, which was not given",
            last.seq, last.key_id
        )));
    };
    if !key.verify(&canonical, &last.mac) {
        return Ok(bad(format!(
            "the last entry (seq {}) does not verify under key {}",
            last.seq, last.key_id
        )));
    }
    let next_key = if last.kind == kind::KEY_ROTATION {
        match last.detail["new_key_id"].as_str() {
            Some(id) => id.to_string(),
            None => return Ok(bad("the last entry is a key rotation without a key".into())),
        }
    } else {
        last.key_id.clone()
    };
    if !known.contains_key(&next_key) {
        return Ok(bad(format!(
            "the log continues under key {next_key}, which was not given"
        )));
    }

    // MACs back to the last checkpoint or segment start, newest first.
    let mut macs = vec![last.mac.clone()];
    let mut since_checkpoint = u64::from(last.kind != kind::CHECKPOINT);
    let mut base = ([0; 32], 0);
    let mut at = last;
    loop {
        match at.kind.as_str() {
            kind::CHECKPOINT => match checkpoint_base(&at) {
                Some(b) => {
                    base = b;
                    break;
                }
                None => return Ok(bad(format!("checkpoint seq {} is malformed", at.seq))),
            },
            kind::SEGMENT_START => {
                base = ([0; 32], at.seq);
                break;
            }
            _ => {}
        }
        let Some((offset, line)) = back.prev_line()? else {
            break;
        };
        match Entry::parse_line(&line) {
            Ok((e, _)) => {
                if e.kind != kind::CHECKPOINT {
                    since_checkpoint += 1;
                }
                macs.push(e.mac.clone());
                at = e;
            }
            Err(why) => {
                return Ok(bad(format!(
                    "the line at offset {offset} is not an entry: {why}"
                )));
            }
        }
    }
    let chain = macs.iter().rev().fold(base.0, |h, m| chain_step(&h, m));
    Ok(Tail::Good(GoodTail {
        seq: last_seq,
        mac: last_mac,
        next_key,
        chain,
        chain_since: base.1,
        since_checkpoint,
    }))
}

/// The running hash and its start recorded by a checkpoint (which covers the entries
/// before it, so folding its own MAC follows).
fn checkpoint_base(cp: &Entry) -> Option<([u8; 32], u64)> {
    let hash = cp.detail["chain_hash"].as_str().filter(|h| is_hex64(h))?;
    let since = cp.detail["since"].as_u64()?;
    let mut chain = [0; 32];
    hex::decode_to_slice(hash, &mut chain).ok()?;
    Some((chain, since))
}

/// Replaces `path` with `content`: write a temporary file, sync it, rename, sync the
/// directory. A crash leaves the old or the new file.
/// The temporary has a random name, is created with `O_EXCL` (a link planted under any
/// name is never followed) and mode 0600.
fn write_atomically(path: &Path, content: &str) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut f = tempfile::Builder::new()
        .prefix(".skua-audit.")
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    f.write_all(content.as_bytes())?;
    f.as_file().sync_all()?;
    f.persist(path).map_err(|e| e.error)?;
    sync_dir(path)
}

/// Syncs the directory holding `path`, so that a new name in it survives a crash.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}
