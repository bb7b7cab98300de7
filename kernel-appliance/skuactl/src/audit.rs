//! `skuactl audit verify`: checks an audit log file offline (no API, no daemon), with the
//! keys it was written under and, ideally, a copy of its checkpoint file. See docs/audit.md.

use std::path::PathBuf;
use std::process::ExitCode;

use skua_audit::{AuditKey, Report};

/// Usage of `skuactl audit verify`.
pub const USAGE: &str = "\
usage: skuactl audit verify FILE [--key-file F]... [--key-env VAR]... [--checkpoint F] [--json]
           verify the audit log FILE's HMAC chain with every key it has been under (key files
           and variables hold the secret as hex; at least one key); --checkpoint: a copy of
           FILE.checkpoint, to detect entries cut off the end; --json: the whole report
       exit codes: 0 the log verifies (a partial last line left by a crash is a warning);
           1 it does not (the first bad entry is printed: line, seq, reason); 2 usage error,
           or a file or key that cannot be read";

/// Runs `skuactl audit ARGS...`.
pub fn main(args: &[String]) -> ExitCode {
    match args.first().map(String::as_str) {
        Some("verify") => match verify(&args[1..]) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(why) => {
                eprintln!("skuactl audit: {why}");
                ExitCode::from(2)
            }
        },
        Some("-h" | "--help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        other => {
            let what = other.map_or("no audit command".to_string(), |c| {
                format!("unknown audit command {c:?}")
            });
            eprintln!("skuactl audit: {what}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Whether the log verified; `Err` for usage and I/O errors.
fn verify(args: &[String]) -> Result<bool, String> {
    let (mut file, mut keys, mut checkpoint, mut json) = (None, Vec::new(), None, false);
    let mut i = 0;
    while i < args.len() {
        let (flag, inline) = match args[i].split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (args[i].as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag {
            "--key-file" => {
                let f = value()?;
                keys.push(AuditKey::from_file(&f).map_err(chain)?);
            }
            "--key-env" => keys.push(AuditKey::from_env(&value()?).map_err(chain)?),
            "--checkpoint" => checkpoint = Some(PathBuf::from(value()?)),
            "--json" if inline.is_none() => json = true,
            f if file.is_none() && !f.starts_with('-') => file = Some(PathBuf::from(f)),
            f => return Err(format!("unexpected argument {f}\n{USAGE}")),
        }
        i += 1;
    }
    let file = file.ok_or_else(|| format!("verify needs a log file\n{USAGE}"))?;
    if keys.is_empty() {
        return Err(format!(
            "verify needs the log's keys (--key-file or --key-env)\n{USAGE}"
        ));
    }
    let report = skua_audit::verify(&file, &keys, checkpoint.as_deref()).map_err(chain)?;
    if json {
        println!("{}", report.to_json());
    } else {
        print_report(&report);
    }
    if report.is_ok() && checkpoint.is_none() {
        eprintln!(
            "skuactl audit: note: without --checkpoint, entries cut off the end of the log \
             cannot be detected"
        );
    }
    Ok(report.is_ok())
}

fn print_report(r: &Report) {
    let name = r.path.display();
    if let Some(p) = &r.partial_tail {
        eprintln!(
            "skuactl audit: warning: {name}: line {} ({} bytes) is not a complete entry ({}): \
             the remains of a write cut short by a crash; verified up to the entry before it",
            p.line, p.bytes, p.why
        );
    }
    match &r.first_bad {
        Some(bad) => {
            println!("{name}: {bad}");
            println!(
                "{name}: {} entries verified before it; nothing after it was checked",
                r.entries_verified
            );
        }
        None => {
            let range = r
                .last_seq
                .map_or("no entries".to_string(), |s| format!("seq 0..{s}"));
            println!(
                "{name}: OK, {} entries verified ({range}), keys {}, {} rotations, {} \
                 checkpoints{}",
                r.entries_verified,
                if r.key_ids.is_empty() {
                    "none".to_string()
                } else {
                    r.key_ids.join(" -> ")
                },
                r.rotations,
                r.checkpoints,
                r.checkpoint_file_seq.map_or(String::new(), |s| format!(
                    ", checkpoint file's seq {s} found"
                )),
            );
        }
    }
}

/// An error with its causes, `: `-separated.
fn chain(e: skua_audit::Error) -> String {
    let mut s = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        s.push_str(&format!(": {c}"));
        cause = c.source();
    }
    s
}
