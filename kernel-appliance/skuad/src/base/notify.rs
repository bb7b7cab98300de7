//! systemd's readiness protocol (sd_notify(3)): `READY=1` once skuad answers on every
//! dataplane it will use (after the XDP self-test with `--xdp-required`), `RELOADING=1` /
//! `READY=1` around a reload, `STOPPING=1`. With `Type=notify`, `systemctl is-active skuad`
//! is then "active" only for a skuad that passed its start-up checks, which is what the
//! appliance's boot health gate (`skuactl health --unit skuad.service`) relies on.
//!
//! A no-op without `$NOTIFY_SOCKET` (skuad run by hand or by the tests).

use std::os::unix::net::UnixDatagram;

/// Sends one notification (newline-separated `KEY=VALUE` lines); failures are ignored (the
/// protocol is best-effort by design).
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    // '@' names a socket in the abstract namespace (sd_notify(3), "NOTIFY_SOCKET").
    let _ = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), &path)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_the_socket_in_the_environment() {
        let dir = std::env::temp_dir().join(format!("skuad-notify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        // set_var is unsafe in edition 2024 (other test threads read the environment): the
        // notification comes from a child test process that gets the variable at spawn.
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &child_test_name(), "--nocapture"])
            .env("NOTIFY_SOCKET", &path)
            .env("SKUAD_NOTIFY_CHILD", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let mut buf = [0u8; 64];
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=test");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The harness's name of [`child_sends`] (this module's path without the crate name).
    fn child_test_name() -> String {
        let module = module_path!();
        let module = module.split_once("::").map_or(module, |(_, m)| m);
        format!("{module}::child_sends")
    }

    #[test]
    fn child_sends() {
        if std::env::var_os("SKUAD_NOTIFY_CHILD").is_some() {
            notify("READY=1\nSTATUS=test");
        }
    }
}
