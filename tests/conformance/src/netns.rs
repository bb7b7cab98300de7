//! Network-namespace guard, bounded external commands, and running code
//! (socket creation) inside the namespace.
//!
//! A socket stays in the namespace it was created in, so the harness creates
//! its sockets on threads that first `setns(2)` into the test namespace; the
//! test's own thread never changes namespace.

use std::fs::File;
use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sched::{CloneFlags, setns};

/// Runs `program args…` to completion, waiting at most `timeout`; returns its
/// stdout, or an error with its stderr when it fails or takes too long (it is
/// killed then).
pub fn run_bounded(program: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    run_bounded_in(None, program, args, timeout)
}

/// [`run_bounded`] with a working directory.
pub fn run_bounded_in(
    cwd: Option<&std::path::Path>,
    program: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<String, String> {
    let mut cmd = Command::new(program);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    // Drain both pipes on their own threads so a chatty program (cargo)
    // cannot block on a full pipe while we wait for it.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out_reader = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err_reader = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} {args:?} did not finish within {timeout:?}"
                ));
            }
            Ok(None) => thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("waiting for {program}: {e}")),
        }
    };
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{program} {args:?} failed ({status}): {}{}",
            err.trim(),
            out.trim()
        ))
    }
}

/// A network namespace with only `lo` (up), deleted on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
    handle: Option<File>,
}

impl NetNs {
    /// Creates `skua-conf-<pid>-<tag>` and brings its loopback up.
    pub fn create(tag: &str) -> Result<Self, String> {
        let name = format!("skua-conf-{}-{tag}", std::process::id());
        // A stale namespace of the same name can only come from an earlier
        // process with the same pid that was killed; remove it quietly.
        if std::path::Path::new("/run/netns").join(&name).exists() {
            let _ = run_bounded("ip", &["netns", "delete", &name], Duration::from_secs(10));
        }
        run_bounded("ip", &["netns", "add", &name], Duration::from_secs(10))?;
        // From here on the guard owns the namespace: any error below deletes it.
        let mut ns = NetNs { name, handle: None };
        run_bounded(
            "ip",
            &["-n", &ns.name, "link", "set", "lo", "up"],
            Duration::from_secs(10),
        )?;
        let path = std::path::Path::new("/run/netns").join(&ns.name);
        let file = File::open(&path).map_err(|e| format!("open {}: {e}", path.display()))?;
        ns.handle = Some(file);
        Ok(ns)
    }

    /// The namespace's name (as `ip netns` knows it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Moves the **calling thread** into the namespace. Only for threads the
    /// harness spawned for this purpose ([`NetNs::run_in`], worker pools).
    pub fn enter_current_thread(&self) -> Result<(), String> {
        let handle = self.handle.as_ref().ok_or("namespace handle not open")?;
        setns(handle, CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns({}): {e}", self.name))
    }

    /// Runs `f` on a fresh thread that has entered the namespace and returns
    /// its result. Sockets created by `f` stay in the namespace.
    pub fn run_in<T, F>(&self, f: F) -> Result<T, String>
    where
        T: Send,
        F: FnOnce() -> T + Send,
    {
        thread::scope(|s| {
            let worker = s.spawn(|| {
                self.enter_current_thread()?;
                Ok(f())
            });
            worker
                .join()
                .map_err(|_| "thread in namespace panicked".to_string())?
        })
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        self.handle = None;
        if let Err(e) = run_bounded(
            "ip",
            &["netns", "delete", &self.name],
            Duration::from_secs(10),
        ) {
            eprintln!(
                "warning: could not delete network namespace {}: {e}",
                self.name
            );
        }
    }
}

/// A temporary directory removed on drop (kept when `SKUA_KEEP_TMP` is set,
/// for post-mortems).
#[derive(Debug)]
pub struct TempDir {
    path: std::path::PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/skua-conf-<pid>-<tag>`.
    pub fn create(tag: &str) -> Result<Self, String> {
        let path = std::env::temp_dir().join(format!("skua-conf-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
        Ok(TempDir { path })
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Writes `contents` to `name` inside the directory and returns its path.
    pub fn write(&self, name: &str, contents: &str) -> Result<std::path::PathBuf, String> {
        let p = self.path.join(name);
        std::fs::write(&p, contents).map_err(|e| format!("write {}: {e}", p.display()))?;
        Ok(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("SKUA_KEEP_TMP").is_some() {
            eprintln!("keeping {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
