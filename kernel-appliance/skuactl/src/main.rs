//! `skuactl`: command-line entry point. See the crate docs of the `skuactl` library.

use std::fs::File;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use skuactl::{bundle, health, slots, system, upgrade};

mod api;
mod audit;
mod ctl;

const USAGE: &str = "\
usage: skuactl upgrade FILE [--tries N] [--reboot]
           install the update bundle FILE (skua_N.update; - = standard input; a block device
           works too) into the inactive root slot; the next boot tries it N times (default 3)
           and falls back to the running version unless its health check passes
       skuactl slots                  the root slots, their versions and the boot entries
       skuactl health [--server ADDR[:PORT]] [--name NAME] [--type TYPE] [--expect VALUE]
                      [--wait SECS] [--unit UNIT] [--trial-only]
           query skuad until it answers (default: 127.0.0.1:53, localhost. A, expect
           127.0.0.1, wait 0 s = one try); --unit: UNIT must be active too (skuad.service:
           its start-up checks passed); --trial-only: succeed at once unless this is a
           counted trial boot (skua-health.service)
       skuactl audit verify FILE --key-file F...   check an audit log offline (skuactl audit --help)
       skuactl --version
offline/test options for upgrade and slots: --disk DEV --esp DIR --booted-root UUID
exit codes of upgrade, slots, health: 0 done, 1 failed, 2 usage error";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if ctl::is_api_command(&args) {
        return ctl::main(&args);
    }
    let r = match args.first().map(String::as_str) {
        Some("upgrade") => cmd_upgrade(&args[1..]),
        Some("slots") => cmd_slots(&args[1..]),
        Some("health") => cmd_health(&args[1..]),
        Some("audit") => return audit::main(&args[1..]),
        Some("--version") => {
            println!("skuactl {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Some("-h" | "--help") => {
            println!("{USAGE}\n{}", ctl::USAGE);
            Ok(())
        }
        _ => Err(Failure::Usage("no command".into())),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(why)) => {
            eprintln!("skuactl: {why}\n{USAGE}\n{}", ctl::USAGE);
            ExitCode::from(2)
        }
        Err(Failure::Failed(why)) => {
            eprintln!("skuactl: {why}");
            ExitCode::from(1)
        }
    }
}

enum Failure {
    Usage(String),
    Failed(String),
}

fn failed(e: impl std::fmt::Display) -> Failure {
    Failure::Failed(e.to_string())
}

/// Options shared by upgrade and slots: where the slots are (defaults: the running system).
#[derive(Default)]
struct Where {
    disk: Option<PathBuf>,
    esp: Option<PathBuf>,
    booted: Option<slots::Guid>,
}

impl Where {
    /// Consumes `args[*i]` (and its value) if it is one of the shared options.
    fn take(&mut self, args: &[String], i: &mut usize) -> Result<bool, Failure> {
        let flag = args[*i].as_str();
        if !matches!(flag, "--disk" | "--esp" | "--booted-root") {
            return Ok(false);
        }
        *i += 1;
        let v = args
            .get(*i)
            .ok_or_else(|| Failure::Usage(format!("{flag} needs a value")))?;
        match flag {
            "--disk" => self.disk = Some(v.into()),
            "--esp" => self.esp = Some(v.into()),
            _ => {
                self.booted = Some(
                    slots::Guid::parse(v).ok_or_else(|| Failure::Usage(format!("bad UUID {v}")))?,
                )
            }
        }
        Ok(true)
    }

    fn resolve(self) -> Result<(PathBuf, PathBuf, slots::Guid), Failure> {
        let booted = match self.booted {
            Some(b) => b,
            None => system::booted_root().map_err(failed)?,
        };
        let disk = match self.disk {
            Some(d) => d,
            None => system::disk_of(booted).map_err(failed)?,
        };
        let esp = match self.esp {
            Some(e) => e,
            None => system::esp().map_err(failed)?,
        };
        Ok((disk, esp, booted))
    }
}

fn number<T: std::str::FromStr>(args: &[String], i: &mut usize) -> Result<T, Failure> {
    let flag = &args[*i];
    *i += 1;
    args.get(*i)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Failure::Usage(format!("{flag} needs a number")))
}

fn cmd_upgrade(args: &[String]) -> Result<(), Failure> {
    let (mut file, mut tries, mut reboot, mut at) = (None, 3u32, false, Where::default());
    let mut i = 0;
    while i < args.len() {
        if !at.take(args, &mut i)? {
            match args[i].as_str() {
                "--tries" => tries = number(args, &mut i)?,
                "--reboot" => reboot = true,
                f if file.is_none() && (f == "-" || !f.starts_with('-')) => {
                    file = Some(f.to_string())
                }
                f => return Err(Failure::Usage(format!("unexpected argument {f}"))),
            }
        }
        i += 1;
    }
    let file = file.ok_or_else(|| Failure::Usage("upgrade needs a bundle file".into()))?;
    let (disk, esp, booted_root) = at.resolve()?;
    let input: Box<dyn Read> = if file == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(&file).map_err(|e| failed(format!("{file}: {e}")))?)
    };
    let b = bundle::open(input).map_err(|e| failed(format!("{file}: {e}")))?;
    eprintln!(
        "skuactl: installing version {} from {file} into the inactive slot of {}",
        b.manifest.version,
        disk.display()
    );
    let t = upgrade::Target {
        disk,
        esp,
        booted_root,
        tries,
    };
    let done = upgrade::install(b, &t).map_err(failed)?;
    for r in &done.removed {
        eprintln!("skuactl: removed boot entry {}", r.display());
    }
    println!(
        "installed version {} in slot {} (boot entry {}); running: {}",
        done.version,
        done.slot,
        done.uki.display(),
        done.previous
            .map_or("unlabelled".to_string(), |p| format!("version {p}"))
    );
    if tries > 0 {
        println!(
            "the next boot tries version {} up to {tries} time(s); it becomes permanent once \
             skua-health passes, else systemd-boot returns to the running version",
            done.version
        );
    }
    if reboot {
        let st = std::process::Command::new("systemctl")
            .arg("reboot")
            .status()
            .map_err(|e| failed(format!("systemctl reboot: {e}")))?;
        if !st.success() {
            return Err(failed(format!("systemctl reboot: {st}")));
        }
    }
    Ok(())
}

fn cmd_slots(args: &[String]) -> Result<(), Failure> {
    let mut at = Where::default();
    let mut i = 0;
    while i < args.len() {
        if !at.take(args, &mut i)? {
            return Err(Failure::Usage(format!("unexpected argument {}", args[i])));
        }
        i += 1;
    }
    let (disk_path, esp, booted) = at.resolve()?;
    let mut dev =
        File::open(&disk_path).map_err(|e| failed(format!("{}: {e}", disk_path.display())))?;
    let disk = slots::Disk::read(&mut dev).map_err(failed)?;
    for s in &disk.slots {
        println!(
            "slot {}: {:<12} root {} (partition {}), verity {}{}",
            s.name,
            s.version()
                .map_or("empty".to_string(), |v| format!("version {v}")),
            s.root.uuid,
            s.root.number,
            s.verity.uuid,
            if s.root.uuid == booted {
                "  [running]"
            } else {
                ""
            }
        );
    }
    let dir = upgrade::uki_dir(&esp);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| failed(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            upgrade::parse_entry(&name).map(|p| (name, p, e.path()))
        })
        .collect();
    entries.sort_by_key(|(_, (v, _), _)| std::cmp::Reverse(*v));
    let selected = system::loader_var("LoaderEntrySelected");
    for (name, (version, counter), path) in entries {
        let slot = upgrade::uki_file_root(&path)
            .and_then(|r| disk.slot_of(r))
            .map_or("no slot".to_string(), |s| format!("slot {}", s.name));
        let state = match counter {
            None => "good".to_string(),
            Some((0, _)) => "bad (no tries left)".to_string(),
            Some((left, done)) => format!("on trial ({left} tries left, {done} done)"),
        };
        // systemd-boot records the entry's name as it was before its counter was bumped.
        let booted_version = selected
            .as_deref()
            .and_then(upgrade::parse_entry)
            .map(|p| p.0);
        let sel = if booted_version == Some(version) {
            "  [booted]"
        } else {
            ""
        };
        println!("entry {name}: boots {slot}, {state}{sel}");
    }
    Ok(())
}

fn cmd_health(args: &[String]) -> Result<(), Failure> {
    let mut check = health::Check {
        server: SocketAddr::new(IpAddr::from([127, 0, 0, 1]), 53),
        name: "localhost.".into(),
        qtype: hickory_proto::rr::RecordType::A,
        expect: Some("127.0.0.1".into()),
        unit: None,
    };
    let (mut wait, mut trial_only, mut expect_set) = (0u64, false, false);
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        let value = |i: &mut usize| -> Result<String, Failure> {
            *i += 1;
            args.get(*i)
                .cloned()
                .ok_or_else(|| Failure::Usage(format!("{flag} needs a value")))
        };
        match flag {
            "--server" => {
                let v = value(&mut i)?;
                check.server = v
                    .parse::<SocketAddr>()
                    .or_else(|_| v.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
                    .map_err(|_| Failure::Usage(format!("bad --server {v}")))?;
            }
            "--name" => check.name = value(&mut i)?,
            "--type" => {
                let v = value(&mut i)?;
                check.qtype = v
                    .to_ascii_uppercase()
                    .parse()
                    .map_err(|_| Failure::Usage(format!("bad --type {v}")))?;
            }
            "--expect" => {
                check.expect = Some(value(&mut i)?);
                expect_set = true;
            }
            "--wait" => wait = number(args, &mut i)?,
            "--unit" => check.unit = Some(value(&mut i)?),
            "--trial-only" => trial_only = true,
            f => return Err(Failure::Usage(format!("unexpected argument {f}"))),
        }
        i += 1;
    }
    // The default expectation belongs to the default question only.
    if !expect_set
        && (check.name != "localhost." || check.qtype != hickory_proto::rr::RecordType::A)
    {
        check.expect = None;
    }
    if trial_only && !system::trial_boot() {
        println!("skuactl health: not a trial boot, nothing to gate");
        return Ok(());
    }
    let got = check
        .wait(Duration::from_secs(wait), |e| {
            eprintln!("skuactl health: not yet: {e}")
        })
        .map_err(|e| failed(format!("unhealthy: {e}")))?;
    println!(
        "skuactl health: {} {} at {}: {}",
        check.name,
        check.qtype,
        check.server,
        got.join(", ")
    );
    Ok(())
}
