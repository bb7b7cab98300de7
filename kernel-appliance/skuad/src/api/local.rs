//! The local control socket: the API's routes over a UNIX stream socket, for the host's
//! administrator, with no token.
//!
//! Unbound (`control-interface: /run/unbound.ctl`) and Knot (`knotc`) give the local
//! administrator control the same way; tokens stay for remote use.
//!
//! - **Who can connect**: the file's permissions. Mode 0600 (the daemon's user; root
//!   anyway), or 0660 with the group of `control-socket-group:`. The socket is bound under a
//!   temporary name, given its mode and group, and only then renamed into place, so it is
//!   never reachable with looser permissions, whatever the umask.
//! - **Who is calling**: the kernel's credentials of the peer (`SO_PEERCRED`, taken when it
//!   connected). Root or the daemon's own user: role `admin`. A member of the configured
//!   group (its primary group, or a supplementary group listed in `/proc/PID/status`): the
//!   role of `control-socket-group-role:` (default `operator`). Anyone else (the file's mode
//!   was changed by hand): every request that needs a role is refused (403) and audited.
//! - **What they can do**: exactly the HTTP API's routes, with the same roles, the same audit
//!   entries and the same refusals; the actor in the audit log is `local:USER` (no source
//!   address).
//! - **Limits**: [`MAX_CONNECTIONS`] at once (a further one is closed at once), the API's
//!   header timeout.
//!
//! A stale socket left by a daemon that died is replaced; a live one (another skuad answers
//! on it) is left alone: with the default path this daemon then runs without a control
//! socket (warned), with a configured path it does not start.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use tokio::net::UnixListener;
use tokio::sync::Semaphore;

use crate::base::log;
use crate::control::auth::Role;

/// Connections on the control socket at once (root and skuad's user are let in beyond it).
pub const MAX_CONNECTIONS: usize = 16;
/// Longest a control-socket connection stays open (a reload of a large configuration or
/// an audit verification takes seconds; a caller that stops reading must not hold on).
pub const CONNECTION_LIFETIME: std::time::Duration = std::time::Duration::from_secs(600);

/// A caller on the control socket, as the kernel identified it.
#[derive(Clone, Debug)]
pub struct LocalPeer {
    /// `local:USER` (or `local:uid N` for a user without a name).
    pub actor: String,
    /// What it may do; `None`: nothing that needs a role.
    pub role: Option<Role>,
}

/// A bound control socket, ready to serve.
pub struct ControlSocket {
    path: PathBuf,
    /// Inode of the socket we made: at stop only that file is removed.
    ino: u64,
    listener: std::os::unix::net::UnixListener,
    /// `control-socket-group:` and its members' role.
    group: Option<(u32, Role)>,
    own_uid: u32,
}

/// Who gets which role on the socket.
struct Roles {
    /// `control-socket-group:` and its members' role.
    group: Option<(u32, Role)>,
    own_uid: u32,
}

impl Roles {
    fn is_admin(&self, uid: u32) -> bool {
        uid == 0 || uid == self.own_uid
    }

    /// What a peer with these credentials may do.
    fn peer(&self, uid: u32, gid: u32, pid: Option<i32>) -> LocalPeer {
        let actor = match user_name(uid) {
            Some(n) => format!("local:{n}"),
            None => format!("local:uid {uid}"),
        };
        let role = if self.is_admin(uid) {
            Some(Role::Admin)
        } else {
            self.group.and_then(|(g, role)| {
                let member = gid == g || pid.is_some_and(|p| groups_of(p).contains(&g));
                member.then_some(role)
            })
        };
        LocalPeer { actor, role }
    }
}

/// The process's effective uid (the owner of `/proc/self`).
pub fn euid() -> u32 {
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

/// Where the control socket goes for `cfg`: `Ok(None)` when there is none, with whether the
/// path was configured (an error binding it then stops the start).
fn socket_path(cfg: &skua_config::Api) -> (Option<PathBuf>, bool) {
    match &cfg.control_socket {
        Some(l) if l.value.is_empty() => (None, true),
        Some(l) => (Some(PathBuf::from(&l.value)), true),
        None => {
            let xdg = std::env::var("XDG_RUNTIME_DIR").ok();
            (
                skua_config::default_control_socket(euid(), xdg.as_deref()),
                false,
            )
        }
    }
}

/// A group name or number from `/etc/group`.
fn group_id(name: &str) -> Result<u32, String> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let text = std::fs::read_to_string("/etc/group").map_err(|e| format!("/etc/group: {e}"))?;
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            Some((f.next()?, f.nth(1)?))
        })
        .find(|(n, _)| *n == name)
        .and_then(|(_, gid)| gid.parse().ok())
        .ok_or_else(|| format!("no group '{name}' in /etc/group"))
}

/// The name of `uid` in `/etc/passwd`, if it has one.
fn user_name(uid: u32) -> Option<String> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

/// The supplementary groups of `pid` (empty when it is gone or unreadable).
fn groups_of(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                g.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Binds the control socket `cfg` asks for. `Ok(None)`: none (switched off, no default
/// place, or the default place is taken: logged).
pub fn bind(cfg: &skua_config::Config) -> Result<Option<ControlSocket>, String> {
    let a = &cfg.api;
    let (path, configured) = socket_path(a);
    let Some(path) = path else {
        if configured {
            log::info(format_args!(
                "control socket: off (api: control-socket: no)"
            ));
        } else {
            log::info(format_args!(
                "control socket: none (not root and no $XDG_RUNTIME_DIR; set api: control-socket:)"
            ));
        }
        return Ok(None);
    };
    let at = |e: String| match &a.control_socket {
        Some(l) => format!("{}: control socket {}: {e}", l.loc, path.display()),
        None => format!("control socket {}: {e}", path.display()),
    };
    let group = match &a.control_socket_group {
        Some(g) => {
            let gid = group_id(&g.value).map_err(|e| format!("{}: {e}", g.loc))?;
            let role = a
                .control_socket_group_role
                .parse::<Role>()
                .map_err(|e| format!("control-socket-group-role: {e}"))?;
            Some((gid, role))
        }
        None => None,
    };
    match make(&path, group.map(|(g, _)| g)) {
        Ok((listener, ino)) => {
            log::info(format_args!(
                "control socket: {} (mode {}{})",
                path.display(),
                if group.is_some() { "0660" } else { "0600" },
                match &a.control_socket_group {
                    Some(g) => format!(", group {}", g.value),
                    None => String::new(),
                }
            ));
            Ok(Some(ControlSocket {
                path,
                ino,
                listener,
                group,
                own_uid: euid(),
            }))
        }
        Err(e) if !configured => {
            log::warn(format_args!(
                "{}; skuactl needs a token and the HTTP API (set api: control-socket:)",
                at(e)
            ));
            Ok(None)
        }
        Err(e) => Err(at(e)),
    }
}

/// Makes the socket at `path` with its final mode and group before it appears there.
///
/// The directory must belong to root or to skuad and be closed to writes by anyone else:
/// whoever can write in it could put a link where skuad is about to bind, chmod or rename.
/// It is created when missing (its parents 0755, itself 0700, or 0750 with the group); an
/// existing private directory (not searchable by others) is given the group so that its
/// members can reach the socket.
fn make(path: &Path, gid: Option<u32>) -> Result<(std::os::unix::net::UnixListener, u64), String> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or("no directory")?;
    let shown = dir.display();
    if matches!(std::fs::symlink_metadata(dir), Err(e) if e.kind() == io::ErrorKind::NotFound) {
        if let Some(up) = dir.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(up)
                .map_err(|e| format!("creating {}: {e}", up.display()))?;
        }
        std::fs::DirBuilder::new()
            .mode(if gid.is_some() { 0o750 } else { 0o700 })
            .create(dir)
            .map_err(|e| format!("creating {shown}: {e}"))?;
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("{shown}: {e}"))?;
    if !m.is_dir() {
        return Err(format!(
            "{shown} is not a directory (a symbolic link is refused)"
        ));
    }
    if m.uid() != 0 && m.uid() != euid() {
        return Err(format!(
            "{shown} belongs to uid {}: it must be root's or skuad's",
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "{shown} is writable by others (mode {:o}): use a directory only skuad can write",
            m.mode() & 0o7777
        ));
    }
    if let Some(g) = gid
        && m.mode() & 0o001 == 0
        && (m.gid() != g || m.mode() & 0o010 == 0)
    {
        std::os::unix::fs::lchown(dir, None, Some(g)).map_err(|e| format!("chgrp {shown}: {e}"))?;
        std::fs::set_permissions(
            dir,
            std::fs::Permissions::from_mode((m.mode() & 0o7777) | 0o050),
        )
        .map_err(|e| format!("chmod {shown}: {e}"))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => return Err("in use (another skuad answers on it)".into()),
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    // Left by a daemon that died.
                    std::fs::remove_file(path)
                        .map_err(|e| format!("removing the stale one: {e}"))?;
                }
                Err(e) => return Err(format!("exists and cannot be checked: {e}")),
            }
        }
        Ok(_) => return Err("exists and is not a socket (left alone)".into()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.to_string()),
    }
    // In the directory checked above, which nobody else can write: the name is ours.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let listener =
        std::os::unix::net::UnixListener::bind(&tmp).map_err(|e| format!("bind: {e}"))?;
    let ready = (|| -> io::Result<u64> {
        let mode = if gid.is_some() { 0o660 } else { 0o600 };
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
        if let Some(g) = gid {
            std::os::unix::fs::lchown(&tmp, None, Some(g))?;
        }
        std::fs::rename(&tmp, path)?;
        listener.set_nonblocking(true)?;
        Ok(std::fs::symlink_metadata(path)?.ino())
    })();
    match ready {
        Ok(ino) => Ok((listener, ino)),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e.to_string())
        }
    }
}

impl ControlSocket {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves `router` until `stop` resolves.
    pub async fn serve(
        self,
        router: axum::Router,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let listener = match self.listener.try_clone().and_then(UnixListener::from_std) {
            Ok(l) => l,
            Err(e) => {
                log::error(format_args!("control socket: {e}"));
                return;
            }
        };
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let roles = Arc::new(Roles {
            group: self.group,
            own_uid: self.own_uid,
        });
        tokio::pin!(stop);
        loop {
            let stream = tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, _)) => s,
                    Err(e) => {
                        log::warn(format_args!("control socket: accept: {e}"));
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut stop => break,
            };
            let cred = match stream.peer_cred() {
                Ok(c) => c,
                Err(e) => {
                    log::warn(format_args!("control socket: SO_PEERCRED: {e}"));
                    continue;
                }
            };
            // Root and skuad's user are never kept out by the group's members holding
            // every slot; the others share MAX_CONNECTIONS.
            let admin = roles.is_admin(cred.uid());
            let permit = match slots.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) if admin => None,
                Err(_) => continue,
            };
            let (router, roles) = (router.clone(), roles.clone());
            tokio::spawn(async move {
                // /etc/passwd and /proc/PID/status: files, read off the async workers.
                let Ok(peer) = tokio::task::spawn_blocking(move || {
                    roles.peer(cred.uid(), cred.gid(), cred.pid())
                })
                .await
                else {
                    return;
                };
                let busy = Arc::new(AtomicUsize::new(0));
                // A caller that stops reading its reply does not keep its slot.
                let _ = tokio::time::timeout(
                    CONNECTION_LIFETIME,
                    super::httpd::serve_http(stream, peer, router, busy),
                )
                .await;
                drop(permit);
            });
        }
    }

    /// Removes the socket file when dropped, if it is still the one made here (another
    /// daemon may have replaced a socket it found stale).
    pub fn cleanup(&self) -> Cleanup {
        Cleanup {
            path: self.path.clone(),
            ino: self.ino,
        }
    }
}

/// See [`ControlSocket::cleanup`].
pub struct Cleanup {
    path: PathBuf,
    ino: u64,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_from_credentials() {
        let r = Roles {
            group: Some((4242, Role::Dns)),
            own_uid: 1234,
        };
        assert_eq!(r.peer(0, 0, None).role, Some(Role::Admin));
        assert_eq!(r.peer(0, 0, None).actor, "local:root");
        assert_eq!(r.peer(1234, 9, None).role, Some(Role::Admin));
        assert_eq!(r.peer(1000, 4242, None).role, Some(Role::Dns));
        assert_eq!(r.peer(1000, 1000, None).role, None);
        // Supplementary groups come from /proc/PID/status: this process is in its own.
        let me = std::process::id() as i32;
        if let Some(&g) = groups_of(me).first() {
            let r = Roles {
                group: Some((g, Role::Read)),
                own_uid: 1234,
            };
            assert_eq!(r.peer(1000, 1000, Some(me)).role, Some(Role::Read));
        }
    }

    /// A fresh directory for `make`, closed to others.
    fn private_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("skuad-local-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    #[test]
    fn a_stale_socket_is_replaced_a_live_one_and_other_files_left_alone() {
        let d = private_dir("stale");
        let p = d.join("ctl.sock");
        // Stale: bound, then its listener gone (the file stays).
        drop(std::os::unix::net::UnixListener::bind(&p).unwrap());
        let (l, ino) = make(&p, None).expect("a stale socket is replaced");
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!((m.ino(), m.mode() & 0o777), (ino, 0o600));
        // Live: the one just made answers.
        let e = make(&p, None).map(|_| ()).unwrap_err();
        assert!(e.contains("in use"), "{e}");
        assert_eq!(std::fs::symlink_metadata(&p).unwrap().ino(), ino);
        drop(l);
        // Not a socket: left alone.
        let f = d.join("file");
        std::fs::write(&f, "keep").unwrap();
        let e = make(&f, None).map(|_| ()).unwrap_err();
        assert!(e.contains("not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep");
        // Removed at stop only while it is the one made here.
        let (_l, ino) = make(&d.join("c2.sock"), None).unwrap();
        drop(Cleanup {
            path: d.join("c2.sock"),
            ino: ino + 1,
        });
        assert!(d.join("c2.sock").exists());
        drop(Cleanup {
            path: d.join("c2.sock"),
            ino,
        });
        assert!(!d.join("c2.sock").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn directories_others_can_write_or_links_are_refused() {
        let d = private_dir("dirs");
        let open = d.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = make(&open.join("ctl.sock"), None).map(|_| ()).unwrap_err();
        assert!(e.contains("writable by others"), "{e}");
        let link = d.join("link");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        let e = make(&link.join("ctl.sock"), None).map(|_| ()).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        // A missing directory is made closed (0700), its parents 0755.
        let deep = d.join("a/b");
        let (_l, _) = make(&deep.join("ctl.sock"), None).unwrap();
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o777;
        assert_eq!((mode(&d.join("a")), mode(&deep)), (0o755, 0o700));
        // With a group, a private directory gets it (and g+rx), the socket 0660.
        if euid() == 0 {
            let g = d.join("g");
            std::fs::create_dir(&g).unwrap();
            std::fs::set_permissions(&g, std::fs::Permissions::from_mode(0o700)).unwrap();
            let (_l, _) = make(&g.join("ctl.sock"), Some(65534)).unwrap();
            let m = std::fs::symlink_metadata(&g).unwrap();
            assert_eq!((m.gid(), m.mode() & 0o777), (65534, 0o750));
            let m = std::fs::symlink_metadata(g.join("ctl.sock")).unwrap();
            assert_eq!((m.gid(), m.mode() & 0o777), (65534, 0o660));
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn default_path_and_off() {
        let mut cfg = skua_config::Api::default();
        let (p, configured) = socket_path(&cfg);
        assert!(!configured);
        if euid() == 0 {
            assert_eq!(p.unwrap(), Path::new("/run/skua/control.sock"));
        }
        cfg.control_socket = Some(skua_config::Located {
            value: String::new(),
            loc: skua_config::Loc {
                file: Arc::from(Path::new("t.conf")),
                line: 1,
            },
        });
        assert_eq!(socket_path(&cfg), (None, true));
    }
}
