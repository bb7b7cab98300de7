//! Foreground daemons (unbound, nsd, skuad) started inside the test
//! namespace with `ip netns exec`, stopped on drop.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::netns::NetNs;

/// A daemon process (and its process group), killed on drop.
#[derive(Debug)]
pub struct Daemon {
    label: String,
    child: Option<Child>,
    log_path: PathBuf,
}

impl Daemon {
    /// Starts `program args…` in `ns`, in its own process group, with stdout
    /// and stderr appended to `log_path`.
    pub fn spawn(
        ns: &NetNs,
        label: &str,
        program: &Path,
        args: &[String],
        log_path: &Path,
    ) -> Result<Self, String> {
        let log =
            File::create(log_path).map_err(|e| format!("create {}: {e}", log_path.display()))?;
        let log2 = log.try_clone().map_err(|e| format!("dup log: {e}"))?;
        let child = Command::new("ip")
            .args(["netns", "exec", ns.name()])
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start {label} ({}): {e}", program.display()))?;
        Ok(Daemon {
            label: label.to_string(),
            child: Some(child),
            log_path: log_path.to_path_buf(),
        })
    }

    /// The label given at spawn time.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Errors (with the end of its log) if the daemon has exited.
    pub fn check_running(&mut self) -> Result<(), String> {
        let Some(child) = self.child.as_mut() else {
            return Err(format!("{} was stopped", self.label));
        };
        match child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "{} exited ({status}); log {}:\n{}",
                self.label,
                self.log_path.display(),
                self.log_tail(40)
            )),
            Err(e) => Err(format!("{}: wait: {e}", self.label)),
        }
    }

    /// The last `lines` lines of the daemon's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGTERM to the process group, then SIGKILL if it has not exited
    /// within 5 s; every wait is bounded.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let Ok(raw) = i32::try_from(child.id()) else {
            return;
        };
        let pgid = Pid::from_raw(raw);
        let _ = killpg(pgid, Signal::SIGTERM);
        if !wait_bounded(&mut child, Duration::from_secs(5)) {
            let _ = killpg(pgid, Signal::SIGKILL);
            if !wait_bounded(&mut child, Duration::from_secs(5)) {
                eprintln!("warning: {} (pid {raw}) did not die", self.label);
            }
        }
    }
}

fn wait_bounded(child: &mut Child, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            Ok(None) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}
