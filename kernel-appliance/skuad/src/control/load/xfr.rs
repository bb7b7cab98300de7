//! The zone-transfer sections of a load: `tsig-key:` keys, the `provide-xfr:` and `notify:`
//! entries of an auth zone and its versions, secondary zones and their copies.

use std::path::{Path, PathBuf};

use skua_config::Loc;
use skua_engine::acl::Netblock;
use skua_engine::name::WireName;
use skua_engine::zonefile;

use super::{After, FileLoader, LoadError, XfrZoneLoaded, at, parse_addr, zone_serial};

/// The `tsig-key:` keys, their secrets read (`file:PATH`, relative to `base`, a file others
/// cannot read; or `env:VAR`), base64-decoded, at least 16 bytes. Errors name the line and
/// never show the secret.
pub(super) fn tsig_keys(
    keys: &[skua_config::TsigKey],
    base: Option<&Path>,
) -> Result<Vec<skua_xfr::tsig::Key>, LoadError> {
    use skua_xfr::tsig::{Algorithm, Key};
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let name = WireName::parse(&k.name.value, None).map_err(|e| {
            at(
                &k.name.loc,
                format!("tsig-key name '{}': {e}", k.name.value),
            )
        })?;
        let s = &k.secret;
        let text = if let Some(p) = s.value.strip_prefix("file:") {
            let p = PathBuf::from(p);
            let p = match base {
                Some(b) if p.is_relative() => b.join(p),
                _ => p,
            };
            crate::control::auth::read_secret(&p)
                .map_err(|e| at(&s.loc, format!("tsig-key secret: {e}")))?
        } else if let Some(v) = s.value.strip_prefix("env:") {
            std::env::var(v).map_err(|_| {
                at(
                    &s.loc,
                    format!("tsig-key secret: environment variable {v} is not set"),
                )
            })?
        } else {
            return Err(at(&s.loc, "tsig-key secret: must be file:PATH or env:VAR"));
        };
        let secret = data_encoding::BASE64
            .decode(text.trim().as_bytes())
            .map_err(|_| {
                at(
                    &s.loc,
                    format!(
                        "tsig-key '{}': the secret is not base64 (as tsig-keygen or keymgr -t print it)",
                        k.name.value
                    ),
                )
            })?;
        if secret.len() < 16 {
            return Err(at(
                &s.loc,
                format!(
                    "tsig-key '{}': the secret has {} bytes; at least 16 (32 from tsig-keygen or keymgr -t)",
                    k.name.value,
                    secret.len()
                ),
            ));
        }
        let alg = Algorithm::parse(&k.algorithm).ok_or_else(|| {
            at(
                &k.loc,
                format!("tsig-key algorithm '{}' is not implemented", k.algorithm),
            )
        })?;
        out.push(Key::new(&name, alg, secret));
    }
    Ok(out)
}

/// The key named `text` in `provide-xfr:`/`notify:`: `None` for `NOKEY`.
pub(super) fn key_ref(
    text: &str,
    keys: &[skua_xfr::tsig::Key],
    what: &str,
    loc: &Loc,
) -> Result<Option<usize>, LoadError> {
    if text.eq_ignore_ascii_case("NOKEY") {
        return Ok(None);
    }
    let name = WireName::parse(text, None)
        .map_err(|e| at(loc, format!("{what}: key '{text}': {e}")))?
        .to_lowercase();
    keys.iter()
        .position(|k| *k.name() == name)
        .map(Some)
        .ok_or_else(|| {
            at(
                loc,
                format!("{what}: no tsig-key: clause is named '{text}' (or write NOKEY)"),
            )
        })
}

/// One auth zone with `provide-xfr:` or `notify:`: its entries checked, its version made
/// from `recs`, whose SOA gets the serial [`zone_serial`] decides (so the engine serves the
/// serial that transfers send).
pub(super) fn xfr_zone(
    z: &skua_config::AuthZone,
    name: &WireName,
    recs: &mut [(skua_engine::rr::Rr, u32)],
    keys: &[skua_xfr::tsig::Key],
    prev: &crate::base::xfr::Transfers,
    floor: Option<u32>,
) -> Result<XfrZoneLoaded, LoadError> {
    let (allow, notify) = xfr_entries(z, keys)?;
    let version = skua_xfr::zone::Version::new(name, recs.iter().map(|(r, _)| r.clone()).collect())
        .map_err(|e| at(&z.loc, format!("auth-zone '{}': {e}", z.name.value)))?;
    let apex = name.to_lowercase().as_bytes().to_vec();
    let mut serial = zone_serial(prev.zones.get(&apex).map(|p| &*p.version), &version);
    if let Some(f) = floor
        && skua_xfr::zone::serial_lt(serial, f)
    {
        // Served before (with API data) at this serial: never go back.
        serial = f;
    }
    let version = if serial == version.serial() {
        version
    } else {
        for (r, _) in recs.iter_mut() {
            if r.rtype == skua_engine::rr::rtype::SOA {
                *r = skua_xfr::zone::with_serial(r, serial);
            }
        }
        version.with_serial(serial)
    };
    Ok(XfrZoneLoaded {
        apex,
        version: std::sync::Arc::new(version),
        diffs: Vec::new(),
        allow,
        notify,
        ixfr_number: z.ixfr_number as usize,
        ixfr_size: z.ixfr_size,
    })
}

/// A zone's `provide-xfr:` entries and `notify:` targets, checked.
#[allow(clippy::type_complexity)]
pub(super) fn xfr_entries(
    z: &skua_config::AuthZone,
    keys: &[skua_xfr::tsig::Key],
) -> Result<
    (
        Vec<skua_xfr::server::Allow>,
        Vec<crate::base::xfr::NotifyTarget>,
    ),
    LoadError,
> {
    use skua_xfr::server::{Allow, KeyRule};
    let mut allow = Vec::new();
    for l in &z.provide_xfr {
        let (nb, key) = &l.value;
        let netblock: Netblock = nb
            .parse()
            .map_err(|e| at(&l.loc, format!("provide-xfr: '{nb}': {e}")))?;
        let rule = if key.eq_ignore_ascii_case("BLOCKED") {
            KeyRule::Blocked
        } else {
            match key_ref(key, keys, "provide-xfr", &l.loc)? {
                Some(i) => KeyRule::Key(i),
                None => KeyRule::NoKey,
            }
        };
        allow.push(Allow { netblock, rule });
    }
    let mut notify = Vec::new();
    for l in &z.notify {
        let (addr, key) = &l.value;
        let a = parse_addr(addr, 53).map_err(|e| at(&l.loc, format!("notify: {e}")))?;
        notify.push(crate::base::xfr::NotifyTarget {
            addr: a,
            key: key_ref(key, keys, "notify", &l.loc)?,
        });
    }
    Ok((allow, notify))
}

/// Where a secondary zone's `zonefile:` is: as written when absolute, else relative to
/// the configuration file's directory (the working directory without one).
pub(super) fn secondary_zonefile(zf: &str, base: Option<&Path>) -> PathBuf {
    let p = PathBuf::from(zf);
    match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p,
    }
}

/// A secondary zone (`primary:`, `request-xfr:`): its primaries, `allow-notify:`
/// entries and limits checked, and its copy: new data from `after.secondary`, else the
/// copy in force (`prev`), else its zone file when it exists and holds the zone (a file
/// that does not is a warning: the zone is transferred anew), else none.
#[allow(clippy::too_many_arguments)]
pub(super) fn secondary_zone(
    z: &skua_config::AuthZone,
    name: &WireName,
    keys: &[skua_xfr::tsig::Key],
    loader: &mut FileLoader,
    base: Option<&Path>,
    prev: &crate::base::xfr::Transfers,
    after: &After<'_>,
    warnings: &mut Vec<String>,
) -> Result<crate::base::xfr::Secondary, LoadError> {
    use crate::base::xfr::{Primary, Secondary};
    use skua_xfr::server::{Allow, KeyRule};
    let mut primaries = Vec::new();
    for l in &z.primaries {
        let (addr, key) = &l.value;
        if addr.contains('#') {
            return Err(at(
                &l.loc,
                format!("primary '{addr}': transfers over TLS are not supported"),
            ));
        }
        let a = parse_addr(addr, 53).map_err(|_| {
            at(
                &l.loc,
                format!(
                    "primary '{addr}': not an IP address with an optional @PORT (host names are not supported)"
                ),
            )
        })?;
        primaries.push(Primary {
            addr: a,
            key: key_ref(key, keys, "primary", &l.loc)?,
        });
    }
    let mut allow_notify = Vec::new();
    for l in &z.allow_notify {
        let (nb, key) = &l.value;
        let netblock: Netblock = nb
            .parse()
            .map_err(|e| at(&l.loc, format!("allow-notify: '{nb}': {e}")))?;
        let rule = if key.eq_ignore_ascii_case("BLOCKED") {
            KeyRule::Blocked
        } else {
            match key_ref(key, keys, "allow-notify", &l.loc)? {
                Some(i) => KeyRule::Key(i),
                None => KeyRule::NoKey,
            }
        };
        allow_notify.push(Allow { netblock, rule });
    }
    // A primary may NOTIFY its zone, signed with the key it transfers with (Unbound
    // allows its primaries by default too).
    for p in &primaries {
        if let Ok(netblock) = p.addr.ip().to_canonical().to_string().parse::<Netblock>() {
            allow_notify.push(Allow {
                netblock,
                rule: p.key.map_or(KeyRule::NoKey, KeyRule::Key),
            });
        }
    }
    let apex = name.to_lowercase().as_bytes().to_vec();
    let zonefile = z
        .zonefile
        .as_ref()
        .map(|zf| secondary_zonefile(&zf.value, base));
    let (version, confirmed) = match after.secondary.and_then(|m| m.get(&apex)) {
        Some(d) => (
            d.version.clone(),
            d.version.as_ref().map(|_| crate::base::clock::unix_secs()),
        ),
        None => match prev.secondaries.get(&apex) {
            Some(s) => (s.version.clone(), s.confirmed),
            None => match &zonefile {
                Some(path) if path.exists() => match read_secondary_copy(name, path, loader) {
                    Ok((v, mtime)) => (Some(std::sync::Arc::new(v)), Some(mtime)),
                    Err(e) => {
                        warnings.push(format!(
                                "{}: auth-zone '{}': the copy in {} is not usable ({e}); the zone is transferred anew",
                                z.loc,
                                z.name.value,
                                path.display()
                            ));
                        (None, None)
                    }
                },
                _ => (None, None),
            },
        },
    };
    Ok(Secondary {
        apex: name.clone(),
        primaries,
        allow_notify,
        version,
        confirmed,
        limits: skua_xfr::client::Limits {
            max_bytes: z.size_limit_xfr,
            max_records: z.xfr_max_records,
        },
        zonefile,
    })
}

/// A secondary zone's copy from its zone file, and the file's modification time (when the
/// copy was last known current), seconds since the epoch.
pub(super) fn read_secondary_copy(
    name: &WireName,
    path: &Path,
    loader: &mut FileLoader,
) -> Result<(skua_xfr::zone::Version, u64), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mtime = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let mut recs = Vec::new();
    zonefile::parse_zone(
        &text,
        &path.display().to_string(),
        name,
        loader,
        &mut |rr| {
            recs.push(rr);
            Ok(())
        },
    )
    .map_err(|e| e.to_string())?;
    let v = skua_xfr::zone::Version::new(name, recs).map_err(|e| e.to_string())?;
    Ok((v, mtime))
}
