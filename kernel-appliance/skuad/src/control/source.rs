//! Where the configuration comes from: the embedded default or a file.

use std::path::PathBuf;

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
        match self {
            Self::Default => skua_config::parse_str(load::DEFAULT_CONFIG, "<embedded default>")
                .map(|c| (c, None))
                .map_err(|e| load::LoadError(e.to_string())),
            Self::File(p) => skua_config::parse_file(p)
                .map(|c| (c, p.parent().map(std::path::Path::to_path_buf)))
                .map_err(|e| load::LoadError(e.to_string())),
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
