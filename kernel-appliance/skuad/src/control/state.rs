//! Local zones and records added through the API, and the file that keeps them.
//!
//! The state file is an `unbound.conf` fragment (`server:` with `local-zone:` and
//! `local-data:` lines) that skuad rewrites atomically (temporary file, `fsync`, `rename`,
//! `fsync` of the directory) before a change is served, and reads after the main
//! configuration at every start and reload. So a restart serves what the API wrote, an
//! operator can read (and, with skuad stopped, edit) it, and `skuad --check-config` checks it
//! like any configuration. Zones and records of the main configuration are never in it: the
//! API refuses to change those (they belong to the file the operator manages).

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use skua_config::{Loc, Located};
use skua_engine::localzone::LocalZoneType;
use skua_engine::name::WireName;
use skua_engine::text;

/// The state file unless `api: state-file:` says otherwise (used when its directory exists).
pub const DEFAULT_STATE_FILE: &str = "/var/lib/skua/api-state.conf";

/// A local zone added through the API.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ZoneEntry {
    /// Canonical name: lower case, absolute (`example.org.`).
    pub name: String,
    /// Unbound zone type (`static`, `redirect`, ...).
    #[serde(rename = "type")]
    pub zone_type: String,
}

/// What the API added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overlay {
    /// Local zones, in the order added.
    pub zones: Vec<ZoneEntry>,
    /// Records in canonical presentation form (`owner TTL CLASS TYPE RDATA`), in order.
    pub records: Vec<String>,
}

/// Replaces the file at `path` with `text` so that a crash leaves the old file or the new
/// one, never a part: a temporary file (random name, `O_EXCL`, `mode`) in the same
/// directory, `fsync`, `rename`, `fsync` of the directory.
pub fn write_atomic(path: &Path, text: &str, mode: u32) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".skuad-state.")
        .suffix(".tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .tempfile_in(&dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // The rename is durable only once the directory is.
    std::fs::File::open(&dir)?.sync_all()
}

/// A zone name in canonical form, or why it is not one.
pub fn canonical_zone(name: &str) -> Result<String, String> {
    let n = WireName::parse(name, None).map_err(|e| format!("zone name '{name}': {e}"))?;
    Ok(n.to_lowercase().to_string())
}

/// Checks a zone type name.
pub fn check_zone_type(t: &str) -> Result<(), String> {
    t.parse::<LocalZoneType>()
        .map(|_| ())
        .map_err(|e| format!("zone type '{t}': {e}"))
}

/// A record in canonical presentation form (owner lower-cased, TTL, class and type
/// explicit; [`skua_engine::text::rr_to_string`]), or why it does not parse. Two spellings of
/// one record give one string, so duplicates and removals compare strings.
pub fn canonical_rr(rr: &str) -> Result<String, String> {
    let mut r = text::parse_rr(rr, None, 3600).map_err(|e| format!("record '{rr}': {e}"))?;
    r.owner = r.owner.to_lowercase();
    Ok(text::rr_to_string(&r))
}

/// The owner name of a canonical record.
pub fn rr_owner(canonical: &str) -> &str {
    canonical.split(' ').next().unwrap_or("")
}

impl Overlay {
    /// The file's text ([`skua_config::state::render`]: one directive per line, every value
    /// quoted so that it reads back as itself and nothing else).
    pub fn render(&self) -> String {
        skua_config::state::render(
            self.zones
                .iter()
                .map(|z| (z.name.as_str(), z.zone_type.as_str())),
            self.records.iter().map(String::as_str),
        )
    }

    /// Parses a state file's text (`path` names it in errors): the narrow grammar of
    /// [`skua_config::state::parse`], then every zone and record checked and canonicalised
    /// as at the time of writing. Errors name the file and line.
    pub fn parse(text: &str, path: &Path) -> Result<Overlay, String> {
        let f = skua_config::state::parse(text, path).map_err(|e| e.to_string())?;
        let mut o = Overlay::default();
        for l in &f.zones {
            let (name, ty) = &l.value;
            check_zone_type(ty).map_err(|e| format!("{}: {e}", l.loc))?;
            o.zones.push(ZoneEntry {
                name: canonical_zone(name).map_err(|e| format!("{}: {e}", l.loc))?,
                zone_type: ty.clone(),
            });
        }
        for l in &f.records {
            o.records
                .push(canonical_rr(&l.value).map_err(|e| format!("{}: {e}", l.loc))?);
        }
        Ok(o)
    }

    /// Reads a state file (missing file = empty state). The file is opened without following
    /// a symbolic link and must be a regular file: a FIFO or device would hang or feed the
    /// reload.
    pub fn load(path: &Path) -> Result<Overlay, String> {
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let f = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Overlay::default()),
            Err(e) => {
                return Err(format!(
                    "{}: cannot open the API state file: {e}{}",
                    path.display(),
                    if e.raw_os_error() == Some(libc::ELOOP) {
                        " (it is a symbolic link; skuad writes a regular file)"
                    } else {
                        ""
                    }
                ));
            }
        };
        let meta = f
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if !meta.is_file() {
            return Err(format!(
                "{}: the API state file is not a regular file",
                path.display()
            ));
        }
        let mut text = String::new();
        f.take(MAX_STATE_FILE)
            .read_to_string(&mut text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if text.len() as u64 >= MAX_STATE_FILE {
            return Err(format!(
                "{}: the API state file is larger than {} MiB",
                path.display(),
                MAX_STATE_FILE >> 20
            ));
        }
        Overlay::parse(&text, path)
    }

    /// Writes the state file atomically: a crash leaves the old file or the new one. The
    /// new file is created with a random name next to the target (`O_EXCL`, never through
    /// a link someone placed there), mode 0600 (it names what API callers wrote), synced,
    /// then renamed over the target, and the directory synced.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        write_atomic(path, &self.render(), 0o600)
    }

    /// Appends its zones and records to a parsed configuration, located in `path`.
    pub fn merge_into(&self, server: &mut skua_config::Server, path: &Path) {
        let file: std::sync::Arc<Path> = path.into();
        let loc = |i: usize| Loc {
            file: file.clone(),
            line: i,
        };
        // Line numbers match render(): zones, then records, from FIRST_ENTRY_LINE.
        let first = skua_config::state::FIRST_ENTRY_LINE;
        for (i, z) in self.zones.iter().enumerate() {
            server.local_zones.push(Located {
                value: (z.name.clone(), z.zone_type.clone()),
                loc: loc(first + i),
            });
        }
        for (i, r) in self.records.iter().enumerate() {
            server.local_data.push(Located {
                value: r.clone(),
                loc: loc(first + self.zones.len() + i),
            });
        }
    }
}

/// The file next to the state file that keeps the serials of the transferred auth zones
/// whose API data the state file holds (docs/zone-transfer.md): `<state file>.serials`.
pub fn serials_path(state: &Path) -> PathBuf {
    let mut p = state.as_os_str().to_owned();
    p.push(".serials");
    PathBuf::from(p)
}

/// Reads the serials (a missing file is none): lines `ZONE SERIAL`, `#` comments.
pub fn load_serials(state: &Path) -> Result<std::collections::BTreeMap<String, u32>, String> {
    let p = serials_path(state);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(format!("{}: {e}", p.display())),
    };
    let mut out = std::collections::BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("{}:{}: expected 'ZONE SERIAL'", p.display(), i + 1);
        let (zone, serial) = line.split_once(' ').ok_or_else(bad)?;
        let zone = canonical_zone(zone).map_err(|e| format!("{}:{}: {e}", p.display(), i + 1))?;
        out.insert(zone, serial.trim().parse::<u32>().map_err(|_| bad())?);
    }
    Ok(out)
}

/// Writes the serials atomically (as [`Overlay::save`]).
pub fn save_serials(
    state: &Path,
    serials: &std::collections::BTreeMap<String, u32>,
) -> io::Result<()> {
    let mut text = String::from(
        "# skuad: serials of transferred auth zones with API data (never served lower).\n",
    );
    for (z, s) in serials {
        text.push_str(&format!("{z} {s}\n"));
    }
    write_atomic(&serials_path(state), &text, 0o600)
}

/// Largest state file read: far above any real one (a million records is ~60 MB), small
/// enough that a wrong path cannot make a reload read without end.
const MAX_STATE_FILE: u64 = 256 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms() {
        assert_eq!(
            canonical_rr("WWW.Example.ORG. A 198.18.0.1").unwrap(),
            "www.example.org. 3600 IN A 198.18.0.1"
        );
        assert_eq!(
            canonical_rr("www.example.org. 300 IN A 198.18.0.1").unwrap(),
            canonical_rr("www.example.org. IN 300 A 198.18.0.1").unwrap()
        );
        assert!(canonical_rr("www.example.org. A 1.2.3").is_err());
        assert_eq!(canonical_zone("Example.ORG").unwrap(), "example.org.");
        assert!(check_zone_type("static").is_ok());
        assert!(check_zone_type("bogus").is_err());
    }

    #[test]
    fn save_load_round_trip() {
        let dir = std::env::temp_dir().join(format!("skuad-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("state.conf");
        assert_eq!(Overlay::load(&p).unwrap(), Overlay::default());
        let o = Overlay {
            zones: vec![ZoneEntry {
                name: "example.org.".into(),
                zone_type: "static".into(),
            }],
            records: vec![
                canonical_rr("www.example.org. 300 A 198.18.0.1").unwrap(),
                canonical_rr("t.example.org. 300 TXT \"a b\" \"c\"").unwrap(),
            ],
        };
        o.save(&p).unwrap();
        assert_eq!(Overlay::load(&p).unwrap(), o);
        let mut s = skua_config::Server::default();
        o.merge_into(&mut s, &p);
        assert_eq!(s.local_data[1].loc.line, 7);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text.lines()
                .nth(s.local_data[1].loc.line - 1)
                .unwrap()
                .trim(),
            format!("local-data: {}", skua_config::state::quote(&o.records[1]))
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    fn wire_name(labels: &[Vec<u8>]) -> WireName {
        let mut w = Vec::new();
        for l in labels {
            w.push(l.len() as u8);
            w.extend(l);
        }
        w.push(0);
        WireName::from_wire(&w).unwrap()
    }

    /// Records of arbitrary owner names and character-strings (any bytes), and zones of
    /// arbitrary names, as the API would hold them.
    fn overlay() -> impl proptest::strategy::Strategy<Value = Overlay> {
        use proptest::prelude::*;
        let labels = || prop::collection::vec(prop::collection::vec(any::<u8>(), 1..12), 1..4);
        let strings = prop::collection::vec(prop::collection::vec(any::<u8>(), 0..30), 1..4);
        let record = (labels(), 0..=0x7fff_ffffu32, strings).prop_map(|(owner, ttl, strings)| {
            let mut rdata = Vec::new();
            for s in strings {
                rdata.push(s.len() as u8);
                rdata.extend(s);
            }
            let rr = skua_engine::rr::Rr {
                owner: wire_name(&owner).to_lowercase(),
                rtype: skua_engine::rr::rtype::TXT,
                class: 1,
                ttl,
                rdata,
            };
            text::rr_to_string(&rr)
        });
        let zone = (
            labels(),
            prop::sample::select(vec!["static", "redirect", "transparent"]),
        )
            .prop_map(|(l, t)| ZoneEntry {
                name: wire_name(&l).to_lowercase().to_string(),
                zone_type: t.to_string(),
            });
        (
            prop::collection::vec(zone, 0..3),
            prop::collection::vec(record, 0..6),
        )
            .prop_map(|(zones, records)| Overlay { zones, records })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Whatever the API accepted reads back as exactly that, and nothing else.
        #[test]
        fn render_parse_round_trip(o in overlay()) {
            let text = o.render();
            let back = Overlay::parse(&text, Path::new("state.conf"))
                .map_err(proptest::test_runner::TestCaseError::fail)?;
            proptest::prop_assert_eq!(back, o);
        }
    }

    #[test]
    fn the_review_cases() {
        // A TXT with a single quote made the next start fail with "unterminated quoted
        // string"; a crafted one added an include: of any file.
        for rr in [
            "t.ex.test. 300 TXT \"it's\"",
            "t.ex.test. 300 TXT \"x' include: /etc/shadow #\"",
            "t.ex.test. 300 TXT \"x'\\\\\" \"'\"",
            "it's.ex.test. 300 A 198.18.0.1",
        ] {
            let o = Overlay {
                zones: vec![],
                records: vec![canonical_rr(rr).unwrap()],
            };
            let text = o.render();
            assert_eq!(
                Overlay::parse(&text, Path::new("s.conf")).unwrap(),
                o,
                "{text}"
            );
            assert_eq!(text.matches("local-data:").count(), 1, "{text}");
            assert!(!text.contains("\ninclude"), "{text}");
        }
    }

    #[test]
    fn hostile_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("skuad-state-h-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("state.conf");
        std::fs::write(&p, "server:\ninclude: /etc/passwd\n").unwrap();
        let e = Overlay::load(&p).unwrap_err();
        assert!(
            e.contains("state.conf:2:") && e.contains("holds only"),
            "{e}"
        );
        // A symbolic link and a FIFO are refused at once (a FIFO used to hang the reload).
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink("/etc/hostname", &p).unwrap();
        let e = Overlay::load(&p).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        let _ = std::fs::remove_file(&p);
        let ok = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(ok.success());
        let e = Overlay::load(&p).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn saved_file_is_private_and_temporaries_are_not_followed() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("skuad-state-p-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("state.conf");
        // The old fixed temporary name, planted as a link to a file that must not change.
        let victim = dir.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(".state.conf.tmp")).unwrap();
        let o = Overlay {
            zones: vec![],
            records: vec![canonical_rr("a.example. 300 A 198.18.0.1").unwrap()],
        };
        o.save(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        assert_eq!(Overlay::load(&p).unwrap(), o);
        let _ = std::fs::remove_dir_all(dir);
    }
}
