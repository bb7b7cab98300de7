//! Crash test: a child process appends in a tight loop and is killed with SIGKILL at random
//! moments, several times, each new child reopening (and so recovering) the log. Then:
//! the log verifies up to its last complete entry, and every entry whose `append` returned
//! (the child prints its seq right after) is in the log, as written.
//!
//! This file is its own harness (`harness = false`): run with `SKUA_AUDIT_CRASH_CHILD`
//! set, the test binary is the child.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use skua_audit::{AuditKey, AuditLog, OpenOptions, kind, tail, verify};

const CHILD: &str = "SKUA_AUDIT_CRASH_CHILD";
const ROUNDS: u64 = 10;

fn key() -> AuditKey {
    AuditKey::with_id("crash", vec![0x5a; 32]).unwrap()
}

fn main() {
    if let Ok(path) = std::env::var(CHILD) {
        child(Path::new(&path));
        return;
    }
    let name = "kill_9_while_appending_loses_no_returned_entry";
    print!("\nrunning 1 test\ntest {name} ... ");
    std::io::stdout().flush().unwrap();
    let started = Instant::now();
    kill_9_while_appending_loses_no_returned_entry();
    println!(
        "ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; \
         finished in {:.2}s\n",
        started.elapsed().as_secs_f64()
    );
}

/// Appends until killed; prints `seq round n` after each append returns.
fn child(path: &Path) {
    let round: u64 = std::env::var("ROUND").unwrap().parse().unwrap();
    let log = AuditLog::open(path, key(), OpenOptions::new().checkpoint_every(7)).unwrap();
    let mut out = std::io::stdout().lock();
    for n in 0u64.. {
        // Entries of up to ~30 KB, so that some writes span many pages and a kill can land
        // in the middle of one.
        let pad = "x".repeat((n * 7919 % 30_000) as usize);
        let seq = log
            .append(
                kind::API_WRITE,
                "crash",
                None,
                json!({"round": round, "n": n, "pad": pad}),
            )
            .unwrap();
        writeln!(out, "{seq} {round} {n}").unwrap();
        out.flush().unwrap();
    }
}

/// xorshift64*, seeded from the clock; the seed is printed for reruns.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn kill_9_while_appending_loses_no_returned_entry() {
    let seed = std::env::var("SKUA_AUDIT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("crash test seed {seed} (SKUA_AUDIT_CRASH_SEED to repeat)");
    let mut rng = Rng(seed);
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("audit.log");
    let side = dir.path().join("audit.log.checkpoint");
    // seq -> (round, n) for every append that returned.
    let mut returned: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut last_seq_before: Option<u64> = None;
    let mut partial_tails = 0;
    for round in 0..ROUNDS {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(CHILD, &path)
            .env("ROUND", round.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let _ = tx.send(line.unwrap());
            }
        });
        let mut printed = Vec::new();
        if rng.below(4) == 0 {
            // While it may still be opening (and recovering) the log.
            std::thread::sleep(Duration::from_millis(rng.below(15)));
        } else {
            // Mid-stream: once it has appended, however slow the machine is.
            let first = rx.recv_timeout(Duration::from_secs(30));
            printed.extend(first.ok());
            std::thread::sleep(Duration::from_millis(rng.below(250)));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        printed.extend(rx.try_iter());
        for line in &printed {
            // A line cut short by the kill was never printed whole: skip it.
            let f: Vec<u64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
            if let [seq, r, n] = f[..] {
                assert_eq!(r, round);
                assert!(
                    last_seq_before.is_none_or(|l| seq > l),
                    "round {round} reused seq {seq}"
                );
                assert_eq!(
                    returned.insert(seq, (r, n)),
                    None,
                    "seq {seq} returned twice"
                );
            }
        }
        last_seq_before = returned.keys().max().copied();

        // Killed before it created the log (the early kill of a first round on a loaded
        // machine): nothing was appended, so nothing can be missing.
        if !path.exists() {
            assert!(
                returned.is_empty(),
                "round {round}: entries returned, no log"
            );
            continue;
        }
        // The checkpoint file exists once the first checkpoint was written.
        let r = verify(&path, &[key()], side.exists().then_some(side.as_path())).unwrap();
        assert!(r.is_ok(), "round {round}: {r:?}");
        partial_tails += u32::from(r.partial_tail.is_some());
        check_all_returned_are_in_the_log(&path, &returned);
    }
    assert!(
        returned.len() >= 7,
        "the children appended only {} entries",
        returned.len()
    );

    // A last open recovers whatever the last kill left, and the chain goes on.
    let log = AuditLog::open(&path, key(), OpenOptions::new().checkpoint_every(7)).unwrap();
    let seq = log.append(kind::STOP, "system", None, json!({})).unwrap();
    assert!(seq > *returned.keys().max().unwrap());
    drop(log);
    let r = verify(&path, &[key()], Some(&side)).unwrap();
    assert!(r.is_ok() && r.partial_tail.is_none(), "{r:?}");
    check_all_returned_are_in_the_log(&path, &returned);
    let recovered = tail(&path, usize::MAX)
        .unwrap()
        .iter()
        .filter(|e| e.kind == kind::RECOVERED)
        .count();
    eprintln!(
        "{} entries returned in {ROUNDS} rounds; {partial_tails} kills left a partial line, \
         {recovered} recovered on reopen; {} checkpoints",
        returned.len(),
        r.checkpoints
    );
}

fn check_all_returned_are_in_the_log(path: &Path, returned: &HashMap<u64, (u64, u64)>) {
    let entries: HashMap<u64, _> = tail(path, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e))
        .collect();
    for (seq, (round, n)) in returned {
        let e = entries
            .get(seq)
            .unwrap_or_else(|| panic!("seq {seq} returned by append but not in the log"));
        assert_eq!(
            (e.detail["round"].as_u64(), e.detail["n"].as_u64()),
            (Some(*round), Some(*n)),
            "seq {seq} is not the entry that was appended"
        );
    }
}
