//! Where the configuration comes from: the embedded default or a file.

use std::path::{Path, PathBuf};

use crate::control::load::{self, Loaded};

/// Where the configuration comes from, for reloads.
#[derive(Clone, Debug)]
pub enum Source {
    /// The embedded default.
    Default,
    /// A file.
    File(PathBuf),
}

impl Source {
    /// Loads it.
    pub fn load(&self) -> Result<Loaded, load::LoadError> {
        match self {
            Self::Default => load::load_default(),
            Self::File(p) => load::load_file(p),
        }
    }

    /// Parses it (without compiling), with the directory relative zone files are looked
    /// up in.
    pub fn parse(&self) -> Result<(skua_config::Config, Option<PathBuf>), load::LoadError> {
        self.parse_with(None).map(|p| (p.config, p.dir))
    }

    /// Parses it with the file at `swap.0` read as the text `swap.1` (a shared file checked
    /// before it is written), keeping the text of the `sync: shared-config:` file as parsed.
    pub fn parse_with(&self, swap: Option<(&Path, &str)>) -> Result<Parsed, load::LoadError> {
        let err = |e: String| load::LoadError(e);
        match self {
            Self::Default => skua_config::parse_str(load::DEFAULT_CONFIG, "<embedded default>")
                .map(|config| Parsed {
                    config,
                    dir: None,
                    shared: None,
                })
                .map_err(|e| err(e.to_string())),
            Self::File(p) => {
                let (config, texts) =
                    skua_config::parse_file_with(p, swap).map_err(|e| err(e.to_string()))?;
                let dir = p.parent().map(Path::to_path_buf);
                let shared = shared_text(&config, dir.as_deref(), texts).map_err(err)?;
                Ok(Parsed {
                    config,
                    dir,
                    shared,
                })
            }
        }
    }

    /// For logs and the API.
    pub fn describe(&self) -> String {
        match self {
            Self::Default => "<embedded default>".into(),
            Self::File(p) => p.display().to_string(),
        }
    }
}

/// A parsed configuration.
pub struct Parsed {
    /// The configuration.
    pub config: skua_config::Config,
    /// The directory relative paths are looked up in.
    pub dir: Option<PathBuf>,
    /// The `sync: shared-config:` file (as configured, made absolute) and the text parsed.
    pub shared: Option<(PathBuf, String)>,
}

/// The `sync: shared-config:` file and its text among those parsed, or why it is not there
/// (a shared file the configuration does not include would replicate nothing it serves).
fn shared_text(
    cfg: &skua_config::Config,
    dir: Option<&Path>,
    texts: Vec<(PathBuf, String)>,
) -> Result<Option<(PathBuf, String)>, String> {
    let Some(s) = &cfg.sync.shared_config else {
        return Ok(None);
    };
    let p = PathBuf::from(&s.value);
    let p = match dir {
        Some(d) if p.is_relative() => d.join(p),
        _ => p,
    };
    let canon = std::fs::canonicalize(&p)
        .map_err(|e| format!("{}: sync: shared-config {}: {e}", s.loc, p.display()))?;
    let text = texts
        .into_iter()
        .find(|(c, _)| *c == canon)
        .map(|(_, t)| t)
        .ok_or_else(|| {
            format!(
                "{}: sync: shared-config {} is not included by the configuration (add 'include: {}')",
                s.loc,
                p.display(),
                s.value
            )
        })?;
    Ok(Some((p, text)))
}
