//! Local zones and records added through the API, and the file that keeps them.
//!
//! The state file is an `unbound.conf` fragment (`server:` with `local-zone:` and
//! `local-data:` lines) that skuad rewrites atomically (temporary file, `fsync`, `rename`,
//! `fsync` of the directory) before a change is served, and reads after the main
//! configuration at every start and reload. So a restart serves what the API wrote, an
//! operator can read (and, with skuad stopped, edit) it, and `skuad --check-config` checks it
//! like any configuration. Zones and records of the main configuration are never in it: the
//! API refuses to change those (they belong to the file the operator manages).

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use skua_config::{Loc, Located};
use skua_engine::localzone::LocalZoneType;
use skua_engine::name::WireName;
use skua_engine::text;

/// A local zone added through the API.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
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
/// explicit), or why it does not parse. Two spellings of one record give one string, so
/// duplicates and removals compare strings.
pub fn canonical_rr(rr: &str) -> Result<String, String> {
    let r = text::parse_rr(rr, None, 3600).map_err(|e| format!("record '{rr}': {e}"))?;
    let class = match r.class {
        1 => "IN".to_string(),
        3 => "CH".to_string(),
        c => format!("CLASS{c}"),
    };
    Ok(format!(
        "{} {} {class} {} {}",
        r.owner.to_lowercase(),
        r.ttl,
        text::rtype_to_string(r.rtype),
        text::rdata_to_string(r.rtype, &r.rdata)
    ))
}

/// The owner name of a canonical record.
pub fn rr_owner(canonical: &str) -> &str {
    canonical.split(' ').next().unwrap_or("")
}

fn quote(s: &str) -> String {
    // unbound.conf strings: a value with a double quote inside is written in single quotes
    // (TXT data); one with both cannot come from canonical_rr (its escapes are \DDD).
    if s.contains('"') {
        format!("'{s}'")
    } else {
        format!("\"{s}\"")
    }
}

impl Overlay {
    /// The file's text.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "# skuad API state: local zones and records added through the REST API.\n\
             # Written by skuad (atomically) before each change is served; read after the\n\
             # main configuration at start and reload. Edit only while skuad is stopped.\n\
             server:\n",
        );
        for z in &self.zones {
            let _ = writeln!(out, "    local-zone: {} {}", quote(&z.name), z.zone_type);
        }
        for r in &self.records {
            let _ = writeln!(out, "    local-data: {}", quote(r));
        }
        out
    }

    /// Reads a state file (missing file = empty state).
    pub fn load(path: &Path) -> Result<Overlay, String> {
        if !path.exists() {
            return Ok(Overlay::default());
        }
        let cfg = skua_config::parse_file(path).map_err(|e| e.to_string())?;
        let mut o = Overlay::default();
        for l in &cfg.server.local_zones {
            let (name, ty) = &l.value;
            check_zone_type(ty).map_err(|e| format!("{}: {e}", l.loc))?;
            o.zones.push(ZoneEntry {
                name: canonical_zone(name).map_err(|e| format!("{}: {e}", l.loc))?,
                zone_type: ty.clone(),
            });
        }
        for l in &cfg.server.local_data {
            o.records
                .push(canonical_rr(&l.value).map_err(|e| format!("{}: {e}", l.loc))?);
        }
        Ok(o)
    }

    /// Writes the state file atomically: a crash leaves the old file or the new one.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let tmp = dir.join(format!(
            ".{}.tmp",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "skuad-state".into())
        ));
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(self.render().as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        // The rename is durable only once the directory is.
        std::fs::File::open(&dir)?.sync_all()
    }

    /// Appends its zones and records to a parsed configuration, located in `path`.
    pub fn merge_into(&self, server: &mut skua_config::Server, path: &Path) {
        let file: std::sync::Arc<Path> = path.into();
        let loc = |i: usize| Loc {
            file: file.clone(),
            line: i,
        };
        // Line numbers match render(): four header lines, then zones, then records.
        for (i, z) in self.zones.iter().enumerate() {
            server.local_zones.push(Located {
                value: (z.name.clone(), z.zone_type.clone()),
                loc: loc(5 + i),
            });
        }
        for (i, r) in self.records.iter().enumerate() {
            server.local_data.push(Located {
                value: r.clone(),
                loc: loc(5 + self.zones.len() + i),
            });
        }
    }
}

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
            format!("local-data: '{}'", o.records[1])
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
