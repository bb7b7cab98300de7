//! The parser: clauses, directives, values and includes.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::directives::{
    self, AcmeKey, ApiKey, Arity, AuditKey, AuthKey, ClauseKind, HaKey, ServerKey, Support,
    SyncKey, TsigKeyKey, ZoneKey,
};
use crate::lexer::{Token, tokenize};
use crate::model::{
    AcmeChallenge, AuditFsync, AuthZone, Config, ConnectionLimit, Error, ForwardZone, Loc, Located,
    PortAction, PortRule, SyncUrl, TsigKey, UpstreamAddr, UpstreamHost, Warning, ZoneKind,
};

/// Deepest include nesting accepted (loops are caught before; this bounds pathological but
/// loop-free nesting).
const MAX_INCLUDE_DEPTH: usize = 64;

/// The file being read.
struct Source {
    file: Arc<Path>,
    /// Its directory, for the include fallback; `None` for the virtual text of `parse_str`.
    dir: Option<PathBuf>,
}

/// An `auth-zone:` clause being read.
struct PendingAuthZone {
    loc: Loc,
    name: Option<Located<String>>,
    zonefile: Option<Located<String>>,
    for_downstream: bool,
    for_upstream: bool,
    fallback_enabled: bool,
    primaries: Vec<Located<(String, String)>>,
    provide_xfr: Vec<Located<(String, String)>>,
    notify: Vec<Located<(String, String)>>,
    allow_notify: Vec<Located<(String, String)>>,
    ixfr_number: u32,
    ixfr_size: usize,
    size_limit_xfr: usize,
    xfr_max_records: usize,
}

/// A `tsig-key:` clause being read.
struct PendingTsigKey {
    loc: Loc,
    name: Option<Located<String>>,
    algorithm: Option<Located<String>>,
    secret: Option<Located<String>>,
}

/// A `forward-zone:` or `stub-zone:` clause being read.
struct PendingZone {
    /// The zone, with a placeholder name until `name:` is read.
    zone: ForwardZone,
    name: Option<Located<String>>,
    /// The number of warnings when the clause opened: where its own warning goes, so that
    /// warnings stay in file order.
    warnings_at_open: usize,
}

/// The clause the next directive belongs to.
enum Clause {
    /// Top level: before the first clause, or after `include-toplevel:`.
    None,
    Server,
    AuthZone(PendingAuthZone),
    /// `forward-zone:` or `stub-zone:`.
    Zone(PendingZone),
    /// `api:` (merged into [`Config::api`] as it is read).
    Api,
    /// `audit:` (merged into [`Config::audit`] as it is read), opened at this line.
    Audit(Loc),
    /// `ha:` (merged into [`Config::ha`] as it is read).
    Ha,
    /// `sync:` (merged into [`Config::sync`] as it is read).
    Sync,
    Acme,
    /// `tsig-key:`.
    TsigKey(PendingTsigKey),
    /// An unsupported clause: its directives are counted, the count goes into the warning
    /// pushed when it opened.
    Unsupported {
        name: String,
        warning: usize,
        count: usize,
    },
}

pub(crate) struct Parser {
    config: Config,
    clause: Clause,
    /// Files being read, outermost first: (canonical path, path as opened).
    reading: Vec<(PathBuf, PathBuf)>,
    /// Base of relative include paths set by `directory:` (Unbound chdirs there); `None` is
    /// the working directory.
    include_base: Option<PathBuf>,
    /// The `audit:` line of the clause that gave the last `log:`, for the "log: without
    /// key:" error.
    audit_log_clause: Option<Loc>,
    /// A file read as other text ([`crate::parse_file_with`]): its path (compared
    /// canonical) and the text.
    pub(crate) swap: Option<(PathBuf, String)>,
    /// The text of each file read, by canonical path, when asked ([`crate::parse_file_with`]).
    pub(crate) texts: Option<Vec<(PathBuf, String)>>,
    /// `include:` is an error ([`crate::parse_str_without_includes`]): text from elsewhere
    /// must not make this node read its own files.
    pub(crate) no_include: bool,
    /// Every clause line and directive read, in order, when asked
    /// ([`crate::parse_str_listing`]).
    pub(crate) listing: Option<Vec<crate::model::Written>>,
    /// The name of the clause being read, as written (`""` at top level).
    clause_name: String,
}

impl Parser {
    pub(crate) fn new() -> Self {
        Parser {
            config: Config::default(),
            clause: Clause::None,
            reading: Vec::new(),
            include_base: None,
            audit_log_clause: None,
            swap: None,
            texts: None,
            no_include: false,
            listing: None,
            clause_name: String::new(),
        }
    }

    /// Ends the last clause, checks what needs every clause read (`api:` and `audit:` merge
    /// across clauses) and returns the configuration.
    pub(crate) fn finish(mut self) -> Result<Config, Error> {
        self.close_clause()?;
        let api = &self.config.api;
        match (&api.tls_cert, &api.tls_key) {
            (Some(cert), None) => {
                return Err(Error::at(
                    &cert.loc,
                    "'tls-cert:' without 'tls-key:' in api: (give both or neither)",
                ));
            }
            (None, Some(key)) => {
                return Err(Error::at(
                    &key.loc,
                    "'tls-key:' without 'tls-cert:' in api: (give both or neither)",
                ));
            }
            _ => {}
        }
        if let Some(clause) = &self.audit_log_clause
            && self.config.audit.keys.is_empty()
        {
            return Err(Error::at(
                clause,
                "audit: clause with 'log:' but no 'key:' (the audit log needs a signing key: \
                 'key: file:PATH' or 'key: env:VAR')",
            ));
        }
        Ok(self.config)
    }

    /// Reads and parses the file at `path`. `from` is the include directive, `None` for the
    /// top-level file.
    pub(crate) fn read_file(&mut self, path: &Path, from: Option<&Loc>) -> Result<(), Error> {
        let fail = |msg: String| match from {
            Some(loc) => Error::at(loc, msg),
            None => Error {
                file: path.to_path_buf(),
                line: 0,
                msg,
            },
        };
        if self.reading.len() >= MAX_INCLUDE_DEPTH {
            return Err(fail(format!(
                "includes nested more than {MAX_INCLUDE_DEPTH} deep at '{}'",
                path.display()
            )));
        }
        let canonical = fs::canonicalize(path)
            .map_err(|e| fail(format!("cannot open '{}': {e}", path.display())))?;
        if let Some(pos) = self.reading.iter().position(|(c, _)| *c == canonical) {
            let chain: Vec<String> = self.reading[pos..]
                .iter()
                .map(|(_, shown)| shown.display().to_string())
                .chain(std::iter::once(path.display().to_string()))
                .collect();
            return Err(fail(format!("include loop: {}", chain.join(" -> "))));
        }
        let text = match &self.swap {
            Some((p, t)) if fs::canonicalize(p).is_ok_and(|c| c == canonical) => t.clone(),
            _ => fs::read_to_string(path)
                .map_err(|e| fail(format!("cannot read '{}': {e}", path.display())))?,
        };
        if let Some(texts) = &mut self.texts
            && !texts.iter().any(|(c, _)| *c == canonical)
        {
            texts.push((canonical.clone(), text.clone()));
        }
        if !self.config.files.iter().any(|f| f == path) {
            self.config.files.push(path.to_path_buf());
        }
        self.reading.push((canonical, path.to_path_buf()));
        let source = Source {
            file: Arc::from(path),
            dir: path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .map(Path::to_path_buf),
        };
        self.parse_text(&text, &source)?;
        self.reading.pop();
        Ok(())
    }

    /// Parses text that is not read from disk (`parse_str`).
    pub(crate) fn read_virtual(&mut self, text: &str, name: &str) -> Result<(), Error> {
        let source = Source {
            file: Arc::from(Path::new(name)),
            dir: None,
        };
        self.parse_text(text, &source)
    }

    fn parse_text(&mut self, text: &str, source: &Source) -> Result<(), Error> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (index, line) in text.split('\n').enumerate() {
            let loc = Loc {
                file: Arc::clone(&source.file),
                line: index + 1,
            };
            let tokens = tokenize(line).map_err(|msg| Error::at(&loc, msg))?;
            self.parse_line(tokens, &loc, source)?;
        }
        Ok(())
    }

    /// One line: one or more `name: value...` directives.
    fn parse_line(
        &mut self,
        mut toks: Vec<Token>,
        loc: &Loc,
        source: &Source,
    ) -> Result<(), Error> {
        let mut i = 0;
        while i < toks.len() {
            let tok = &toks[i];
            if tok.is_quoted() {
                return Err(Error::at(
                    loc,
                    format!(
                        "expected a directive name ending in ':', found the quoted string {}",
                        tok.written()
                    ),
                ));
            }
            let Some(colon) = tok.text.find(':') else {
                return Err(Error::at(
                    loc,
                    format!(
                        "unknown keyword '{}' (a directive name ends with ':', as in 'port: 53')",
                        tok.text
                    ),
                ));
            };
            if colon == 0 {
                return Err(Error::at(
                    loc,
                    format!("stray ':' in '{}' (no directive name before it)", tok.text),
                ));
            }
            let name = tok.text[..colon].to_owned();
            let rest = tok.text[colon + 1..].to_owned();
            // `port:53` is `port: 53`: the rest becomes the first value.
            if rest.is_empty() {
                i += 1;
            } else {
                toks[i] = Token::bare(rest);
            }
            i += self.directive(&name, &toks[i..], loc, source)?;
        }
        Ok(())
    }

    /// Handles directive `name` whose values start at `vals[0]`; returns how many tokens it
    /// consumed.
    fn directive(
        &mut self,
        name: &str,
        vals: &[Token],
        loc: &Loc,
        source: &Source,
    ) -> Result<usize, Error> {
        if name == "include" || name == "include-toplevel" {
            if self.no_include {
                return Err(Error::at(
                    loc,
                    format!("'{name}:' is not allowed here (no file is read for this text)"),
                ));
            }
            let Some(pattern) = vals.first() else {
                return Err(Error::at(loc, format!("'{name}:' needs a file name")));
            };
            self.include(&pattern.text, name == "include-toplevel", loc, source)?;
            return Ok(1);
        }
        if let Some(kind) = directives::clause(name) {
            self.close_clause()?;
            self.open_clause(kind, name, loc);
            self.clause_name = name.to_owned();
            if let Some(l) = &mut self.listing {
                l.push(crate::model::Written {
                    clause: name.to_owned(),
                    directive: None,
                    loc: loc.clone(),
                });
            }
            return Ok(0);
        }
        if let Some(l) = &mut self.listing {
            l.push(crate::model::Written {
                clause: self.clause_name.clone(),
                directive: Some(name.to_owned()),
                loc: loc.clone(),
            });
        }
        match &mut self.clause {
            Clause::None => {
                if loose_count(vals, 1) == 0 && !is_known_directive(name) {
                    Err(unknown_clause(name, loc))
                } else {
                    Err(Error::at(
                        loc,
                        format!("'{name}:' is outside any clause (is a 'server:' line missing?)"),
                    ))
                }
            }
            Clause::Server => self.server_directive(name, vals, loc),
            Clause::AuthZone(_) => self.auth_zone_directive(name, vals, loc),
            Clause::Zone(_) => self.zone_directive(name, vals, loc),
            Clause::Api => self.api_directive(name, vals, loc),
            Clause::Audit(_) => self.audit_directive(name, vals, loc),
            Clause::Ha => self.ha_directive(name, vals, loc),
            Clause::Sync => self.sync_directive(name, vals, loc),
            Clause::Acme => self.acme_directive(name, vals, loc),
            Clause::TsigKey(_) => self.tsig_key_directive(name, vals, loc),
            Clause::Unsupported { count, .. } => {
                let n = loose_count(vals, 1);
                if n == 0 {
                    return Err(unknown_clause(name, loc));
                }
                *count += 1;
                Ok(n)
            }
        }
    }

    fn open_clause(&mut self, kind: ClauseKind, name: &str, loc: &Loc) {
        self.clause = match kind {
            ClauseKind::Server => Clause::Server,
            ClauseKind::AuthZone => Clause::AuthZone(PendingAuthZone {
                loc: loc.clone(),
                name: None,
                zonefile: None,
                for_downstream: true,
                for_upstream: true,
                fallback_enabled: false,
                primaries: Vec::new(),
                provide_xfr: Vec::new(),
                notify: Vec::new(),
                allow_notify: Vec::new(),
                ixfr_number: 100,
                ixfr_size: 1 << 20,
                size_limit_xfr: crate::model::DEFAULT_SIZE_LIMIT_XFR,
                xfr_max_records: crate::model::DEFAULT_XFR_MAX_RECORDS,
            }),
            ClauseKind::ForwardZone | ClauseKind::StubZone => {
                let kind = if kind == ClauseKind::ForwardZone {
                    ZoneKind::Forward
                } else {
                    ZoneKind::Stub
                };
                let placeholder = Located {
                    value: String::new(),
                    loc: loc.clone(),
                };
                Clause::Zone(PendingZone {
                    zone: ForwardZone::new(kind, placeholder, loc.clone()),
                    name: None,
                    warnings_at_open: self.config.warnings.len(),
                })
            }
            ClauseKind::Api => Clause::Api,
            ClauseKind::Audit => Clause::Audit(loc.clone()),
            ClauseKind::Ha => Clause::Ha,
            ClauseKind::Sync => Clause::Sync,
            ClauseKind::Acme => Clause::Acme,
            ClauseKind::TsigKey => Clause::TsigKey(PendingTsigKey {
                loc: loc.clone(),
                name: None,
                algorithm: None,
                secret: None,
            }),
            ClauseKind::Unsupported => {
                // The message is completed with the directive count when the clause ends.
                self.config.warnings.push(Warning {
                    loc: loc.clone(),
                    msg: String::new(),
                });
                Clause::Unsupported {
                    name: name.to_owned(),
                    warning: self.config.warnings.len() - 1,
                    count: 0,
                }
            }
        };
    }

    fn close_clause(&mut self) -> Result<(), Error> {
        self.clause_name.clear();
        match std::mem::replace(&mut self.clause, Clause::None) {
            Clause::None
            | Clause::Server
            | Clause::Api
            | Clause::Audit(_)
            | Clause::Ha
            | Clause::Sync
            | Clause::Acme => {}
            Clause::AuthZone(p) => {
                let Some(name) = p.name else {
                    return Err(Error::at(&p.loc, "auth-zone: clause without 'name:'"));
                };
                let mut zone = AuthZone::new(name, p.loc);
                zone.zonefile = p.zonefile;
                zone.for_downstream = p.for_downstream;
                zone.for_upstream = p.for_upstream;
                zone.fallback_enabled = p.fallback_enabled;
                zone.primaries = p.primaries;
                zone.provide_xfr = p.provide_xfr;
                zone.notify = p.notify;
                zone.allow_notify = p.allow_notify;
                zone.ixfr_number = p.ixfr_number;
                zone.ixfr_size = p.ixfr_size;
                zone.size_limit_xfr = p.size_limit_xfr;
                zone.xfr_max_records = p.xfr_max_records;
                self.config.auth_zones.push(zone);
            }
            Clause::TsigKey(p) => {
                let Some(name) = p.name else {
                    return Err(Error::at(&p.loc, "tsig-key: clause without 'name:'"));
                };
                let Some(secret) = p.secret else {
                    return Err(Error::at(
                        &p.loc,
                        "tsig-key: clause without 'secret:' (file:PATH or env:VAR)",
                    ));
                };
                let norm = |n: &str| n.trim_end_matches('.').to_ascii_lowercase();
                if let Some(first) = self
                    .config
                    .tsig_keys
                    .iter()
                    .find(|k| norm(&k.name.value) == norm(&name.value))
                {
                    return Err(Error::at(
                        &name.loc,
                        format!(
                            "tsig-key '{}' is defined twice (first at {})",
                            name.value, first.name.loc
                        ),
                    ));
                }
                let algorithm = match p.algorithm {
                    None => "hmac-sha256".to_owned(),
                    Some(a) => {
                        let v = a.value.trim_end_matches('.').to_ascii_lowercase();
                        if v != "hmac-sha256" {
                            return Err(Error::at(
                                &a.loc,
                                format!(
                                    "'algorithm:' '{}' is not implemented (hmac-sha256 is)",
                                    a.value
                                ),
                            ));
                        }
                        v
                    }
                };
                self.config.tsig_keys.push(TsigKey {
                    name,
                    algorithm,
                    secret,
                    loc: p.loc,
                });
            }
            Clause::Zone(p) => {
                let mut zone = p.zone;
                let clause = zone.kind.clause();
                let Some(name) = p.name else {
                    return Err(Error::at(
                        &zone.loc,
                        format!("{clause}: clause without 'name:'"),
                    ));
                };
                zone.name = name;
                if zone.addrs.is_empty() && zone.hosts.is_empty() {
                    // Unbound accepts such a zone (and fails every query in it).
                    let prefix = zone_prefix(zone.kind);
                    let warning = Warning {
                        loc: zone.loc.clone(),
                        msg: format!(
                            "{clause}: '{}' has no '{prefix}-addr:' or '{prefix}-host:': its \
                             queries have nowhere to go",
                            zone.name.value
                        ),
                    };
                    self.config.warnings.insert(p.warnings_at_open, warning);
                }
                self.config.forward_zones.push(zone);
            }
            Clause::Unsupported {
                name,
                warning,
                count,
            } => {
                let (noun, verb) = if count == 1 {
                    ("directive", "is")
                } else {
                    ("directives", "are")
                };
                self.config.warnings[warning].msg = format!(
                    "clause '{name}:' is not supported yet; its {count} {noun} {verb} ignored"
                );
            }
        }
        Ok(())
    }

    fn warn(&mut self, loc: &Loc, msg: String) {
        self.config.warnings.push(Warning {
            loc: loc.clone(),
            msg,
        });
    }

    fn server_directive(&mut self, name: &str, vals: &[Token], loc: &Loc) -> Result<usize, Error> {
        match directives::server(name) {
            Some(Support::Implemented(key)) => self.apply_server(key, name, vals, loc),
            Some(Support::Unsupported(arity)) => {
                need(name, vals, arity, loc)?;
                self.warn(loc, format!("'{name}' is not supported yet and is ignored"));
                Ok(loose_count(vals, arity))
            }
            None => {
                let n = misplaced_count(name, vals);
                if n == 0 {
                    return Err(unknown_clause(name, loc));
                }
                let owner = owner_clause(name, "server:");
                let msg = match owner {
                    Some(owner) => format!(
                        "unknown server: directive '{name}', ignored ('{name}:' belongs in {} \
                         clause)",
                        with_article(owner)
                    ),
                    None => format!("unknown directive '{name}', ignored"),
                };
                self.warn(loc, msg);
                Ok(n)
            }
        }
    }

    fn auth_zone_directive(
        &mut self,
        name: &str,
        vals: &[Token],
        loc: &Loc,
    ) -> Result<usize, Error> {
        match directives::auth_zone(name) {
            Some(Support::Implemented(key)) => {
                need(name, vals, key.arity(), loc)?;
                // An optional value is one when it is on the line and not a directive.
                let n = if vals.len() > key.arity() && !looks_like_directive(&vals[key.arity()]) {
                    key.max_arity()
                } else {
                    key.arity()
                };
                no_more(name, vals, n, loc)?;
                // Missing key name: no TSIG.
                let second = vals
                    .get(1)
                    .filter(|_| n == 2)
                    .map_or_else(|| "NOKEY".to_owned(), |t| t.text.clone());
                let pair = Located {
                    value: (vals[0].text.clone(), second),
                    loc: loc.clone(),
                };
                let Clause::AuthZone(zone) = &mut self.clause else {
                    unreachable!("auth_zone_directive is called in auth-zone: clauses only")
                };
                let value = Located {
                    value: vals[0].text.clone(),
                    loc: loc.clone(),
                };
                match key {
                    AuthKey::Name => {
                        if let Some(first) = &zone.name {
                            return Err(Error::at(
                                loc,
                                format!(
                                    "second 'name:' in this auth-zone: clause (the first is at \
                                     {}); each auth-zone: has one name",
                                    first.loc
                                ),
                            ));
                        }
                        zone.name = Some(value);
                    }
                    AuthKey::Zonefile => zone.zonefile = Some(value),
                    AuthKey::Primary | AuthKey::RequestXfr => zone.primaries.push(pair),
                    AuthKey::AllowNotify => zone.allow_notify.push(pair),
                    AuthKey::SizeLimitXfr => {
                        zone.size_limit_xfr = parse_size(name, &vals[0], loc)?.unwrap_or(0);
                        if zone.size_limit_xfr < 1024 {
                            return Err(Error::at(loc, format!("'{name}:' must be at least 1k")));
                        }
                    }
                    AuthKey::XfrMaxRecords => {
                        zone.xfr_max_records =
                            ranged(name, &vals[0], 1, 1_000_000_000, loc)? as usize;
                    }
                    AuthKey::ForDownstream => {
                        zone.for_downstream = parse_bool(name, &vals[0], loc)?
                    }
                    AuthKey::ForUpstream => zone.for_upstream = parse_bool(name, &vals[0], loc)?,
                    AuthKey::FallbackEnabled => {
                        zone.fallback_enabled = parse_bool(name, &vals[0], loc)?;
                    }
                    AuthKey::ProvideXfr => zone.provide_xfr.push(pair),
                    AuthKey::Notify => zone.notify.push(pair),
                    AuthKey::IxfrNumber => {
                        // Within 0..=10000 by the check: fits a u32.
                        zone.ixfr_number = ranged(name, &vals[0], 0, 10_000, loc)? as u32;
                    }
                    AuthKey::IxfrSize => {
                        zone.ixfr_size = parse_size(name, &vals[0], loc)?.unwrap_or(0);
                    }
                }
                Ok(n)
            }
            Some(Support::Unsupported(arity)) => {
                need(name, vals, arity, loc)?;
                self.warn(
                    loc,
                    format!("'{name}' in auth-zone: is not supported yet and is ignored"),
                );
                Ok(loose_count(vals, arity))
            }
            None => self.misplaced(name, "auth-zone:", vals, loc),
        }
    }

    /// A directive that `clause` does not know: a warning (or the unknown-clause error when
    /// it has no value), as in `server:`. Returns how many tokens it takes.
    fn misplaced(
        &mut self,
        name: &str,
        clause: &str,
        vals: &[Token],
        loc: &Loc,
    ) -> Result<usize, Error> {
        let n = misplaced_count(name, vals);
        if n == 0 {
            return Err(unknown_clause(name, loc));
        }
        let owner = owner_clause(name, clause);
        let msg = match owner {
            Some(owner) => format!(
                "'{name}:' is {} directive, not {} one; ignored (is {} '{owner}' line missing?)",
                with_article(owner),
                with_article(clause),
                article(owner),
            ),
            None => format!("unknown {clause} directive '{name}', ignored"),
        };
        self.warn(loc, msg);
        Ok(n)
    }

    fn zone_directive(&mut self, name: &str, vals: &[Token], loc: &Loc) -> Result<usize, Error> {
        let Clause::Zone(pending) = &self.clause else {
            unreachable!("zone_directive is called in forward-zone: and stub-zone: clauses only")
        };
        let kind = pending.zone.kind;
        let clause = match kind {
            ZoneKind::Forward => "forward-zone:",
            ZoneKind::Stub => "stub-zone:",
        };
        let support = match kind {
            ZoneKind::Forward => directives::forward_zone(name),
            ZoneKind::Stub => directives::stub_zone(name),
        };
        let key = match support {
            Some(Support::Implemented(key)) => key,
            Some(Support::Unsupported(arity)) => {
                need(name, vals, arity, loc)?;
                self.warn(
                    loc,
                    format!("'{name}' in {clause} is not supported yet and is ignored"),
                );
                return Ok(loose_count(vals, arity));
            }
            None => return self.misplaced(name, clause, vals, loc),
        };
        let n = take(name, vals, Arity::Exactly(1), loc)?;
        let tok = &vals[0];
        let Clause::Zone(pending) = &mut self.clause else {
            unreachable!("checked above")
        };
        let zone = &mut pending.zone;
        match key {
            ZoneKey::Name => {
                if let Some(first) = &pending.name {
                    return Err(Error::at(
                        loc,
                        format!(
                            "second 'name:' in this {clause} clause (the first is at {}); each \
                             {clause} has one name",
                            first.loc
                        ),
                    ));
                }
                pending.name = Some(Located {
                    value: tok.text.clone(),
                    loc: loc.clone(),
                });
            }
            ZoneKey::Addr => {
                let addr = parse_upstream_addr(name, &tok.text, kind, loc)?;
                zone.addrs.push(Located {
                    value: addr,
                    loc: loc.clone(),
                });
            }
            ZoneKey::Host => {
                let host = parse_upstream_host(name, &tok.text, loc)?;
                zone.hosts.push(Located {
                    value: host,
                    loc: loc.clone(),
                });
            }
            ZoneKey::First => zone.first = parse_bool(name, tok, loc)?,
            ZoneKey::NoCache => zone.no_cache = parse_bool(name, tok, loc)?,
            ZoneKey::TlsUpstream => zone.tls_upstream = parse_bool(name, tok, loc)?,
            ZoneKey::TcpUpstream => zone.tcp_upstream = parse_bool(name, tok, loc)?,
            ZoneKey::Prime => zone.prime = parse_bool(name, tok, loc)?,
        }
        Ok(n)
    }

    fn api_directive(&mut self, name: &str, vals: &[Token], loc: &Loc) -> Result<usize, Error> {
        let Some(key) = directives::api(name) else {
            return self.misplaced(name, "api:", vals, loc);
        };
        let n = take(name, vals, key.arity(), loc)?;
        let vals = &vals[..n];
        let located = |value| Located {
            value,
            loc: loc.clone(),
        };
        let text = || vals[0].text.clone();
        let a = &mut self.config.api;
        match key {
            ApiKey::Enable => a.enable = parse_bool(name, &vals[0], loc)?,
            ApiKey::Interface => a.interfaces.push(located(text())),
            ApiKey::Port => a.port = ranged(name, &vals[0], 1, u16::MAX.into(), loc)? as u16,
            ApiKey::Token => {
                let token = rest_of_line(vals);
                check_token(name, &token, loc)?;
                a.tokens.push(located(token));
            }
            ApiKey::TlsCert => a.tls_cert = Some(located(text())),
            ApiKey::TlsKey => a.tls_key = Some(located(text())),
            ApiKey::MaxBody => {
                let size = parse_size(name, &vals[0], loc)?.unwrap_or(0);
                if size < 1024 {
                    return Err(Error::at(
                        loc,
                        format!(
                            "'{name}:' size '{}' is too small (at least 1k)",
                            vals[0].text
                        ),
                    ));
                }
                a.max_body = size;
            }
            ApiKey::AuthFailLimit => a.auth_fail_limit = ranged_u32(name, &vals[0], loc)?,
            ApiKey::StateFile => a.state_file = Some(located(text())),
            ApiKey::MaxConnections => {
                a.max_connections = ranged(name, &vals[0], 1, 4096, loc)? as u32;
            }
            ApiKey::MaxConnectionsPerSource => {
                a.max_connections_per_source = ranged(name, &vals[0], 1, 4096, loc)? as u32;
            }
            ApiKey::ControlSocket => {
                let t = text();
                let off = t.is_empty() || t == "no";
                if !off && !t.starts_with('/') {
                    return Err(Error::at(
                        loc,
                        format!("'{name}:' '{t}' must be an absolute path, or no"),
                    ));
                }
                a.control_socket = Some(located(if off { String::new() } else { t }));
            }
            ApiKey::ControlSocketGroup => {
                let t = text();
                if t.is_empty() || t.contains([':', '/', ' ']) {
                    return Err(Error::at(
                        loc,
                        format!("'{name}:' '{t}' is not a group name or number"),
                    ));
                }
                a.control_socket_group = Some(located(t));
            }
            ApiKey::ControlSocketGroupRole => {
                let t = text();
                if !TOKEN_ROLES.contains(&t.as_str()) {
                    return Err(Error::at(
                        loc,
                        format!(
                            "'{name}:' role '{t}' is not one of {}",
                            TOKEN_ROLES.join(", ")
                        ),
                    ));
                }
                a.control_socket_group_role = t;
            }
        }
        Ok(n)
    }

    fn audit_directive(&mut self, name: &str, vals: &[Token], loc: &Loc) -> Result<usize, Error> {
        let Some(key) = directives::audit(name) else {
            return self.misplaced(name, "audit:", vals, loc);
        };
        let n = take(name, vals, Arity::Exactly(1), loc)?;
        let value = Located {
            value: vals[0].text.clone(),
            loc: loc.clone(),
        };
        let a = &mut self.config.audit;
        match key {
            AuditKey::Log => {
                a.log = Some(value);
                let Clause::Audit(clause) = &self.clause else {
                    unreachable!("audit_directive is called in audit: clauses only")
                };
                self.audit_log_clause = Some(clause.clone());
            }
            AuditKey::Key => {
                let ok = ["file:", "env:"]
                    .iter()
                    .any(|p| value.value.strip_prefix(p).is_some_and(|r| !r.is_empty()));
                if !ok {
                    // The value is not repeated: it may be a key written by mistake.
                    return Err(Error::at(
                        loc,
                        format!(
                            "'{name}:' must be file:PATH or env:VAR (the key itself is never \
                             written in the configuration)"
                        ),
                    ));
                }
                a.keys.push(value);
            }
            AuditKey::CheckpointEvery => {
                a.checkpoint_every = ranged(name, &vals[0], 1, u64::MAX, loc)?;
            }
            AuditKey::Fsync => {
                a.fsync = if value.value.eq_ignore_ascii_case("entry") {
                    AuditFsync::Entry
                } else if value.value.eq_ignore_ascii_case("batch") {
                    AuditFsync::Batch
                } else {
                    return Err(Error::at(
                        loc,
                        format!("'{name}:' must be entry or batch, not '{}'", value.value),
                    ));
                };
            }
        }
        Ok(n)
    }

    fn tsig_key_directive(
        &mut self,
        name: &str,
        vals: &[Token],
        loc: &Loc,
    ) -> Result<usize, Error> {
        let Some(key) = directives::tsig_key(name) else {
            return self.misplaced(name, "tsig-key:", vals, loc);
        };
        let n = take(name, vals, Arity::Exactly(1), loc)?;
        let Clause::TsigKey(k) = &mut self.clause else {
            unreachable!("tsig_key_directive is called in tsig-key: clauses only")
        };
        let value = Located {
            value: vals[0].text.clone(),
            loc: loc.clone(),
        };
        let slot = match key {
            TsigKeyKey::Name => &mut k.name,
            TsigKeyKey::Algorithm => &mut k.algorithm,
            TsigKeyKey::Secret => {
                let ok = ["file:", "env:"]
                    .iter()
                    .any(|p| value.value.strip_prefix(p).is_some_and(|r| !r.is_empty()));
                if !ok {
                    // The value is not repeated: it may be the secret written by mistake.
                    return Err(Error::at(
                        loc,
                        "'secret:' must be file:PATH or env:VAR (the secret itself is never \
                         written in the configuration)",
                    ));
                }
                &mut k.secret
            }
        };
        if let Some(first) = slot {
            return Err(Error::at(
                loc,
                format!(
                    "second '{name}:' in this tsig-key: clause (the first is at {})",
                    first.loc
                ),
            ));
        }
        *slot = Some(value);
        Ok(n)
    }

    fn ha_directive(&mut self, name: &str, vals: &[Token], loc: &Loc) -> Result<usize, Error> {
        let Some(key) = directives::ha(name) else {
            return self.misplaced(name, "ha:", vals, loc);
        };
        let n = take(name, vals, Arity::Exactly(1), loc)?;
        let h = &mut self.config.ha;
        match key {
            HaKey::Address => h.addresses.push(Located {
                value: vals[0].text.clone(),
                loc: loc.clone(),
            }),
            HaKey::LeaseMax => {
                // Within 10..=60000 by the check: fits a u32.
                h.lease_max_ms = ranged(name, &vals[0], 10, 60_000, loc)? as u32;
            }
        }
        Ok(n)
    }

    fn acme_directive(&mut self, name: &str, vals: &[Token], loc: &Loc) -> Result<usize, Error> {
        let Some(key) = directives::acme(name) else {
            return self.misplaced(name, "acme:", vals, loc);
        };
        let n = take(name, vals, Arity::Exactly(1), loc)?;
        let v = Located {
            value: vals[0].text.clone(),
            loc: loc.clone(),
        };
        let a = &mut self.config.acme;
        match key {
            AcmeKey::Directory => {
                if !v.value.starts_with("https://") {
                    return Err(Error::at(
                        loc,
                        format!(
                            "acme: 'directory:' must be an https:// URL, not '{}'",
                            v.value
                        ),
                    ));
                }
                a.directory = Some(v);
            }
            AcmeKey::Contact => a.contacts.push(v),
            AcmeKey::Name => {
                let ok = !v.value.is_empty()
                    && v.value.len() <= 253
                    && v.value.trim_end_matches('.').split('.').all(|l| {
                        !l.is_empty()
                            && l.len() <= 63
                            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    });
                if !ok {
                    return Err(Error::at(
                        loc,
                        format!(
                            "acme: 'name:' must be a DNS name like dns.example.net, not '{}'",
                            v.value
                        ),
                    ));
                }
                a.names.push(v);
            }
            AcmeKey::Challenge => {
                a.challenge = match v.value.to_ascii_lowercase().as_str() {
                    "http-01" => AcmeChallenge::Http01,
                    "tls-alpn-01" => AcmeChallenge::TlsAlpn01,
                    "dns-01" => AcmeChallenge::Dns01,
                    other => {
                        return Err(Error::at(
                            loc,
                            format!(
                                "acme: 'challenge:' must be http-01, tls-alpn-01 or dns-01, not '{other}'"
                            ),
                        ));
                    }
                };
            }
            AcmeKey::HttpInterface => a.http_interface = Some(v),
            AcmeKey::CaBundle => a.ca_bundle = Some(v),
            AcmeKey::AccountFile => a.account_file = Some(v),
            AcmeKey::Profile => {
                // draft-ietf-acme-profiles §3: a profile name is a short string the
                // directory's meta.profiles lists; printable ASCII without spaces keeps it
                // one token in the order, the log and GET /tls.
                let ok = !v.value.is_empty()
                    && v.value.len() <= 64
                    && v.value.bytes().all(|b| b.is_ascii_graphic() && b != b'"');
                if !ok {
                    return Err(Error::at(
                        loc,
                        format!(
                            "acme: 'profile:' must be a profile name the ACME server lists, like shortlived (1 to 64 printable characters), not '{}'",
                            v.value
                        ),
                    ));
                }
                a.profile = Some(v);
            }
        }
        Ok(n)
    }

    fn sync_directive(&mut self, name: &str, vals: &[Token], loc: &Loc) -> Result<usize, Error> {
        let Some(key) = directives::sync(name) else {
            return self.misplaced(name, "sync:", vals, loc);
        };
        let n = take(name, vals, Arity::Exactly(1), loc)?;
        let v = Located {
            value: vals[0].text.clone(),
            loc: loc.clone(),
        };
        let s = &mut self.config.sync;
        match key {
            SyncKey::From => {
                check_sync_url(&v.value).map_err(|e| Error::at(loc, e))?;
                let plain = SyncUrl::parse(&v.value).is_ok_and(|u| {
                    !u.tls
                        && !u
                            .host
                            .parse::<std::net::IpAddr>()
                            .is_ok_and(|a| a.is_loopback())
                        && u.host != "localhost"
                });
                s.from.push(v);
                if plain {
                    self.config.warnings.push(Warning {
                        loc: loc.clone(),
                        msg:
                            "sync: 'from: http://' sends the token and the configuration in clear \
                              (use https:// with tls-ca:, unless this link is private)"
                                .into(),
                    });
                }
            }
            SyncKey::TokenFile => s.token_file = Some(v),
            SyncKey::SharedConfig => s.shared_config = Some(v),
            SyncKey::TlsCa => s.tls_ca = Some(v),
            // Within 1..=25 by the check: below the API's 30 s stall limit.
            SyncKey::Wait => s.wait_s = ranged(name, &vals[0], 1, 25, loc)? as u32,
        }
        Ok(n)
    }

    fn apply_server(
        &mut self,
        key: ServerKey,
        name: &str,
        vals: &[Token],
        loc: &Loc,
    ) -> Result<usize, Error> {
        let n = take(name, vals, key.arity(), loc)?;
        let vals = &vals[..n];
        let text = || vals[0].text.clone();
        let located = |value| Located {
            value,
            loc: loc.clone(),
        };
        let located_pair = |a: &Token, b: &Token| Located {
            value: (a.text.clone(), b.text.clone()),
            loc: loc.clone(),
        };
        let s = &mut self.config.server;
        match key {
            ServerKey::Interface => s.interfaces.push(located(text())),
            ServerKey::Port => s.port = ranged(name, &vals[0], 1, u16::MAX.into(), loc)? as u16,
            ServerKey::DoIp4 => s.do_ip4 = parse_bool(name, &vals[0], loc)?,
            ServerKey::DoIp6 => s.do_ip6 = parse_bool(name, &vals[0], loc)?,
            ServerKey::DoUdp => s.do_udp = parse_bool(name, &vals[0], loc)?,
            ServerKey::DoTcp => s.do_tcp = parse_bool(name, &vals[0], loc)?,
            ServerKey::NumThreads => {
                s.num_threads = to_usize(name, ranged(name, &vals[0], 1, u64::MAX, loc)?, loc)?;
            }
            ServerKey::SoReuseport => s.so_reuseport = parse_bool(name, &vals[0], loc)?,
            ServerKey::IpFreebind => s.ip_freebind = parse_bool(name, &vals[0], loc)?,
            ServerKey::SoRcvbuf => s.so_rcvbuf = parse_size(name, &vals[0], loc)?,
            ServerKey::SoSndbuf => s.so_sndbuf = parse_size(name, &vals[0], loc)?,
            ServerKey::AccessControl => s.access_control.push(located_pair(&vals[0], &vals[1])),
            ServerKey::LocalZone => s.local_zones.push(located_pair(&vals[0], &vals[1])),
            ServerKey::LocalData => s.local_data.push(located(rest_of_line(vals))),
            ServerKey::LocalDataPtr => s.local_data_ptr.push(located(rest_of_line(vals))),
            ServerKey::Identity => s.identity = Some(text()),
            ServerKey::Version => s.version = Some(text()),
            ServerKey::HideIdentity => s.hide_identity = parse_bool(name, &vals[0], loc)?,
            ServerKey::HideVersion => s.hide_version = parse_bool(name, &vals[0], loc)?,
            ServerKey::Verbosity => {
                s.verbosity = ranged(name, &vals[0], 0, u8::MAX.into(), loc)? as u8;
            }
            ServerKey::EdnsBufferSize => {
                s.edns_buffer_size = ranged(name, &vals[0], 512, u16::MAX.into(), loc)? as u16;
            }
            ServerKey::TcpIdleTimeout => {
                s.tcp_idle_timeout_ms = ranged(name, &vals[0], 0, u64::MAX, loc)?;
            }
            ServerKey::IncomingNumTcp => {
                s.incoming_num_tcp =
                    to_usize(name, ranged(name, &vals[0], 0, u64::MAX, loc)?, loc)?;
            }
            ServerKey::MaxUdpSize => {
                // 65536 is Unbound's "no maximum"; a UDP payload cannot exceed 65535 anyway.
                let size = ranged(name, &vals[0], 512, 65536, loc)?;
                s.max_udp_size = size.min(u16::MAX.into()) as u16;
            }
            ServerKey::MinimalResponses => s.minimal_responses = parse_bool(name, &vals[0], loc)?,
            ServerKey::CpuAffinity => s.cpu_affinity = Some(text()),
            ServerKey::Logfile => s.logfile = Some(text()),
            ServerKey::UseSyslog => s.use_syslog = parse_bool(name, &vals[0], loc)?,
            ServerKey::Username => s.username = Some(text()),
            ServerKey::Chroot => s.chroot = Some(text()),
            ServerKey::Pidfile => s.pidfile = Some(text()),
            ServerKey::RrlResponsesPerSecond => {
                s.rrl.responses_per_second = ranged_u32(name, &vals[0], loc)?;
            }
            ServerKey::RrlNodataPerSecond => {
                s.rrl.nodata_per_second = Some(ranged_u32(name, &vals[0], loc)?);
            }
            ServerKey::RrlNxdomainsPerSecond => {
                s.rrl.nxdomains_per_second = Some(ranged_u32(name, &vals[0], loc)?);
            }
            ServerKey::RrlReferralsPerSecond => {
                s.rrl.referrals_per_second = Some(ranged_u32(name, &vals[0], loc)?);
            }
            ServerKey::RrlErrorsPerSecond => {
                s.rrl.errors_per_second = Some(ranged_u32(name, &vals[0], loc)?);
            }
            ServerKey::RrlAllPerSecond => s.rrl.all_per_second = ranged_u32(name, &vals[0], loc)?,
            ServerKey::RrlWindow => s.rrl.window = ranged(name, &vals[0], 1, 3600, loc)? as u32,
            ServerKey::RrlSlip => s.rrl.slip = ranged(name, &vals[0], 0, 10, loc)? as u8,
            ServerKey::RrlIpv4PrefixLength => {
                s.rrl.ipv4_prefix_length = ranged(name, &vals[0], 0, 32, loc)? as u8;
            }
            ServerKey::RrlIpv6PrefixLength => {
                s.rrl.ipv6_prefix_length = ranged(name, &vals[0], 0, 128, loc)? as u8;
            }
            ServerKey::RrlExemptClients => s.rrl.exempt_clients.push(located(text())),
            ServerKey::RrlQpsScale => s.rrl.qps_scale = ranged_u32(name, &vals[0], loc)?,
            ServerKey::RrlLogOnly => s.rrl.log_only = parse_bool(name, &vals[0], loc)?,
            ServerKey::RrlMaxTableSize => {
                s.rrl.max_table_size =
                    to_usize(name, ranged(name, &vals[0], 1, u64::MAX, loc)?, loc)?;
            }
            ServerKey::RrlMinTableSize => {
                s.rrl.min_table_size =
                    to_usize(name, ranged(name, &vals[0], 0, u64::MAX, loc)?, loc)?;
            }
            ServerKey::TlsCertBundle => s.tls_cert_bundle = Some(located(text())),
            ServerKey::TlsSystemCert => s.tls_system_cert = parse_bool(name, &vals[0], loc)?,
            ServerKey::TlsServiceKey => s.tls_service_key = Some(located(text())),
            ServerKey::TlsServicePem => s.tls_service_pem = Some(located(text())),
            ServerKey::TlsPort => {
                s.tls_port = ranged(name, &vals[0], 1, u16::MAX.into(), loc)? as u16;
            }
            ServerKey::PadResponses => s.pad_responses = parse_bool(name, &vals[0], loc)?,
            ServerKey::PadResponsesBlockSize => {
                s.pad_responses_block_size = ranged(name, &vals[0], 1, 65535, loc)? as u16;
            }
            ServerKey::HttpsPort => {
                s.https_port = ranged(name, &vals[0], 1, u16::MAX.into(), loc)? as u16;
            }
            ServerKey::HttpEndpoint => s.http_endpoint = http_endpoint(name, &text(), loc)?,
            ServerKey::HttpMaxStreams => {
                // At least one stream, and no more than a 32-bit SETTINGS value.
                s.http_max_streams = ranged(name, &vals[0], 1, u32::MAX.into(), loc)? as u32;
            }
            ServerKey::HttpQueryBufferSize => {
                s.http_query_buffer_size = parse_size(name, &vals[0], loc)?.unwrap_or(0);
            }
            ServerKey::HttpResponseBufferSize => {
                s.http_response_buffer_size = parse_size(name, &vals[0], loc)?.unwrap_or(0);
            }
            ServerKey::HttpNotlsDownstream => {
                s.http_notls_downstream = parse_bool(name, &vals[0], loc)?;
            }
            ServerKey::QuicPort => {
                s.quic_port = ranged(name, &vals[0], 1, u16::MAX.into(), loc)? as u16;
                s.quic_port_loc = Some(loc.clone());
            }
            ServerKey::TcpConnectionLimit => {
                let limit = ranged(name, &vals[1], 0, u32::MAX.into(), loc)? as u32;
                s.tcp_connection_limits.push(Located {
                    value: ConnectionLimit {
                        netblock: vals[0].text.clone(),
                        limit,
                    },
                    loc: loc.clone(),
                });
            }
            ServerKey::TcpConnectionLimitPerSource => {
                s.tcp_connection_limit_per_source =
                    ranged(name, &vals[0], 0, u32::MAX.into(), loc)? as u32;
            }
            ServerKey::MsgCacheSize => {
                s.msg_cache_size = parse_size(name, &vals[0], loc)?.unwrap_or(0);
            }
            ServerKey::MsgCacheSlabs => s.msg_cache_slabs = slabs(name, &vals[0], loc)?,
            ServerKey::RrsetCacheSize => {
                s.rrset_cache_size = parse_size(name, &vals[0], loc)?.unwrap_or(0);
            }
            ServerKey::RrsetCacheSlabs => s.rrset_cache_slabs = slabs(name, &vals[0], loc)?,
            ServerKey::CacheMinTtl => s.cache_min_ttl = ranged_u32(name, &vals[0], loc)?,
            ServerKey::CacheMaxTtl => s.cache_max_ttl = ranged_u32(name, &vals[0], loc)?,
            ServerKey::CacheMaxNegativeTtl => {
                s.cache_max_negative_ttl = ranged_u32(name, &vals[0], loc)?;
            }
            ServerKey::Prefetch => s.prefetch = parse_bool(name, &vals[0], loc)?,
            ServerKey::ServeExpired => s.serve_expired = parse_bool(name, &vals[0], loc)?,
            ServerKey::ServeExpiredTtl => s.serve_expired_ttl = ranged_u32(name, &vals[0], loc)?,
            ServerKey::ServeExpiredTtlReset => {
                s.serve_expired_ttl_reset = parse_bool(name, &vals[0], loc)?;
            }
            ServerKey::ServeExpiredReplyTtl => {
                s.serve_expired_reply_ttl = ranged_u32(name, &vals[0], loc)?;
            }
            ServerKey::ServeExpiredClientTimeout => {
                s.serve_expired_client_timeout_ms = ranged_u32(name, &vals[0], loc)?;
            }
            ServerKey::OutgoingRange => {
                s.outgoing_range = to_usize(name, ranged(name, &vals[0], 1, u64::MAX, loc)?, loc)?;
            }
            ServerKey::OutgoingPortPermit | ServerKey::OutgoingPortAvoid => {
                let action = if key == ServerKey::OutgoingPortPermit {
                    PortAction::Permit
                } else {
                    PortAction::Avoid
                };
                let rule = parse_port_rule(name, &vals[0], action, loc)?;
                s.outgoing_port_rules.push(Located {
                    value: rule,
                    loc: loc.clone(),
                });
            }
            ServerKey::UseCapsForId => s.use_caps_for_id = parse_bool(name, &vals[0], loc)?,
            ServerKey::CapsExempt => s.caps_exempt.push(located(text())),
            ServerKey::DoNotQueryLocalhost => {
                s.do_not_query_localhost = parse_bool(name, &vals[0], loc)?;
            }
            ServerKey::UnwantedReplyThreshold => {
                s.unwanted_reply_threshold = ranged(name, &vals[0], 0, u64::MAX, loc)?;
            }
            ServerKey::TcpUpstream => s.tcp_upstream = parse_bool(name, &vals[0], loc)?,
            ServerKey::TlsUpstream => s.tls_upstream = parse_bool(name, &vals[0], loc)?,
            ServerKey::InfraHostTtl => s.infra_host_ttl = ranged_u32(name, &vals[0], loc)?,
            ServerKey::NumQueriesPerThread => {
                s.num_queries_per_thread =
                    to_usize(name, ranged(name, &vals[0], 1, u64::MAX, loc)?, loc)?;
            }
            ServerKey::JostleTimeout => s.jostle_timeout_ms = ranged_u32(name, &vals[0], loc)?,
            ServerKey::Ede => s.ede = parse_bool(name, &vals[0], loc)?,
            ServerKey::EdeServeExpired => s.ede_serve_expired = parse_bool(name, &vals[0], loc)?,
            ServerKey::Directory => {
                let dir = text();
                // Unbound chdirs to `directory:` as soon as it reads it ("" does nothing), so
                // relative includes after it are relative to it.
                if !dir.is_empty() {
                    let dir = PathBuf::from(&dir);
                    self.include_base = Some(match &self.include_base {
                        Some(base) if dir.is_relative() => base.join(dir),
                        _ => dir,
                    });
                }
                s.directory = Some(text());
            }
        }
        Ok(n)
    }

    fn include(
        &mut self,
        pattern: &str,
        toplevel: bool,
        loc: &Loc,
        source: &Source,
    ) -> Result<(), Error> {
        if toplevel {
            self.close_clause()?;
        }
        for path in self.resolve_include(pattern, loc, source)? {
            self.read_file(&path, Some(loc))?;
            if toplevel {
                // Each file included with include-toplevel: ends at top level, as in Unbound.
                self.close_clause()?;
            }
        }
        Ok(())
    }

    /// The files an include pattern names, in order. A pattern without wildcards must name
    /// an existing file; a pattern with wildcards may match nothing (a warning).
    fn resolve_include(
        &mut self,
        pattern: &str,
        loc: &Loc,
        source: &Source,
    ) -> Result<Vec<PathBuf>, Error> {
        if pattern.is_empty() {
            return Err(Error::at(loc, "empty include file name"));
        }
        // The characters that make Unbound call glob(3) (with GLOB_BRACE and GLOB_TILDE).
        let is_glob = pattern.contains(['*', '?', '[', '{', '~']);
        let patterns = if is_glob {
            expand_braces(&expand_tilde(pattern))
        } else {
            vec![pattern.to_owned()]
        };
        // Where relative patterns are looked up, in order: the working directory (or the last
        // `directory:`), then the directory of the including file.
        let mut bases: Vec<Option<PathBuf>> = vec![self.include_base.clone()];
        if let Some(dir) = &source.dir
            && Some(dir) != self.include_base.as_ref()
            && patterns.iter().any(|p| Path::new(p).is_relative())
        {
            bases.push(Some(dir.clone()));
        }
        let mut tried = Vec::new();
        for base in &bases {
            let mut found = Vec::new();
            for p in &patterns {
                let full = match base {
                    Some(b) if Path::new(p).is_relative() => b.join(p),
                    _ => PathBuf::from(p),
                };
                if is_glob {
                    found.extend(glob_files(&full, pattern, loc)?);
                } else if full.exists() {
                    found.push(full.clone());
                }
                if !tried.contains(&full) {
                    tried.push(full);
                }
            }
            if !found.is_empty() {
                return Ok(found);
            }
        }
        let tried: Vec<String> = tried.iter().map(|p| format!("'{}'", p.display())).collect();
        if is_glob {
            self.warn(
                loc,
                format!(
                    "include pattern '{pattern}' matches no files (tried {}); nothing included",
                    tried.join(", ")
                ),
            );
            Ok(Vec::new())
        } else {
            Err(Error::at(
                loc,
                format!(
                    "cannot open include file '{pattern}': no such file (tried {})",
                    tried.join(", ")
                ),
            ))
        }
    }
}

/// The paths matching glob `full` (whose base directory part is literal), sorted like glob(3).
fn glob_files(full: &Path, pattern: &str, loc: &Loc) -> Result<Vec<PathBuf>, Error> {
    let full = full.to_string_lossy();
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        // As glob(3): `*` does not match a leading dot (editor backups, `.swp` files).
        require_literal_leading_dot: true,
    };
    let paths = glob::glob_with(&full, options)
        .map_err(|e| Error::at(loc, format!("bad include pattern '{pattern}': {e}")))?;
    paths
        .map(|p| p.map_err(|e| Error::at(loc, format!("include '{pattern}': {e}"))))
        .collect()
}

/// `~` and `~/...` as glob(3) with GLOB_TILDE (from `$HOME`).
fn expand_tilde(pattern: &str) -> String {
    match (pattern.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            format!("{}{rest}", home.to_string_lossy())
        }
        _ => pattern.to_owned(),
    }
}

/// `a{b,c}d` is `abd` and `acd`, as glob(3) with GLOB_BRACE (nesting allowed).
fn expand_braces(pattern: &str) -> Vec<String> {
    let Some(open) = pattern.find('{') else {
        return vec![pattern.to_owned()];
    };
    let mut depth = 0;
    let mut commas = Vec::new();
    let mut close = None;
    for (i, c) in pattern[open..].char_indices() {
        let i = open + i;
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            ',' if depth == 1 => commas.push(i),
            _ => {}
        }
    }
    let Some(close) = close else {
        return vec![pattern.to_owned()];
    };
    let (prefix, suffix) = (&pattern[..open], &pattern[close + 1..]);
    let mut bounds = vec![open];
    bounds.extend(&commas);
    bounds.push(close);
    bounds
        .windows(2)
        .flat_map(|w| expand_braces(&format!("{prefix}{}{suffix}", &pattern[w[0] + 1..w[1]])))
        .collect()
}

/// Whether `tok` starts another directive on the same line (`name:` or `name:value`).
fn looks_like_directive(tok: &Token) -> bool {
    if tok.is_quoted() {
        return false;
    }
    let Some((name, rest)) = tok.text.split_once(':') else {
        return false;
    };
    name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !rest.starts_with(':')
}

/// How many values a directive whose arity we do not trust takes: at least `min`, then up to
/// the next token that looks like a directive. With `min` 1, the first token is not taken if
/// it is a known directive name (`frob: port: 53` is `frob:` without a value, then `port:`).
fn loose_count(vals: &[Token], min: usize) -> usize {
    let mut n = if min > 1 {
        min.min(vals.len())
    } else {
        usize::from(vals.first().is_some_and(|t| {
            !looks_like_directive(t)
                || !t
                    .text
                    .split_once(':')
                    .is_some_and(|(n, _)| is_known_name(n))
        }))
    };
    if n == 0 {
        return 0;
    }
    while n < vals.len() && !looks_like_directive(&vals[n]) {
        n += 1;
    }
    n
}

/// How many values a directive that is not known in the current clause takes: the whole
/// line if it takes the rest of the line in the clause it belongs to (`token: a read env:A`
/// in `server:`), else as [`loose_count`].
fn misplaced_count(name: &str, vals: &[Token]) -> usize {
    let rest_of_line = matches!(
        directives::server(name),
        Some(Support::Implemented(key)) if key.arity() == Arity::RestOfLine
    ) || directives::api(name)
        .is_some_and(|key| key.arity() == Arity::RestOfLine);
    if rest_of_line && !vals.is_empty() {
        vals.len()
    } else {
        loose_count(vals, 1)
    }
}

/// Whether `name` is a directive or clause this crate knows about, in any clause.
fn is_known_name(name: &str) -> bool {
    name == "include"
        || name == "include-toplevel"
        || directives::clause(name).is_some()
        || is_known_directive(name)
}

fn is_known_directive(name: &str) -> bool {
    owner_clause(name, "").is_some()
}

/// The first clause other than `except` that knows directive `name`, for the hints in
/// warnings. `name:` is in auth-zone:, forward-zone: and stub-zone:; auth-zone: is named.
fn owner_clause(name: &str, except: &str) -> Option<&'static str> {
    [
        ("server:", directives::server(name).is_some()),
        ("auth-zone:", directives::auth_zone(name).is_some()),
        ("forward-zone:", directives::forward_zone(name).is_some()),
        ("stub-zone:", directives::stub_zone(name).is_some()),
        ("api:", directives::api(name).is_some()),
        ("audit:", directives::audit(name).is_some()),
        ("ha:", directives::ha(name).is_some()),
        ("sync:", directives::sync(name).is_some()),
        ("tsig-key:", directives::tsig_key(name).is_some()),
    ]
    .into_iter()
    .find(|&(clause, known)| known && clause != except)
    .map(|(clause, _)| clause)
}

/// `forward` or `stub`: how the zone's directives start.
fn zone_prefix(kind: ZoneKind) -> &'static str {
    match kind {
        ZoneKind::Forward => "forward",
        ZoneKind::Stub => "stub",
    }
}

/// "a" or "an" for a clause name (`server:`, `auth-zone:`, `forward-zone:`, `api:`, ...).
fn article(clause: &str) -> &'static str {
    if clause.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn with_article(clause: &str) -> String {
    format!("{} {clause}", article(clause))
}

fn unknown_clause(name: &str, loc: &Loc) -> Error {
    Error::at(
        loc,
        format!("unknown clause '{name}:' (or directive '{name}:' without a value)"),
    )
}

/// Checks the number of values a directive of this arity has; returns how many it takes.
fn take(name: &str, vals: &[Token], arity: Arity, loc: &Loc) -> Result<usize, Error> {
    match arity {
        Arity::Exactly(n) => {
            need(name, vals, n, loc)?;
            no_more(name, vals, n, loc)?;
            Ok(n)
        }
        Arity::RestOfLine => {
            need(name, vals, 1, loc)?;
            if vals[0].is_quoted() {
                no_more(name, vals, 1, loc)?;
                Ok(1)
            } else {
                Ok(vals.len())
            }
        }
    }
}

fn need(name: &str, vals: &[Token], n: usize, loc: &Loc) -> Result<(), Error> {
    if vals.len() >= n {
        return Ok(());
    }
    Err(Error::at(
        loc,
        match (n, vals.len()) {
            (1, _) => format!("'{name}:' needs a value"),
            (n, found) => format!("'{name}:' needs {n} values, found {found}"),
        },
    ))
}

fn no_more(name: &str, vals: &[Token], n: usize, loc: &Loc) -> Result<(), Error> {
    match vals.get(n) {
        Some(extra) if !looks_like_directive(extra) => Err(Error::at(
            loc,
            format!(
                "'{name}:' takes {}, found more: '{}' (quote a value that contains spaces)",
                if n == 1 {
                    "one value".to_owned()
                } else {
                    format!("exactly {n} values")
                },
                extra.text
            ),
        )),
        _ => Ok(()),
    }
}

fn rest_of_line(vals: &[Token]) -> String {
    match vals {
        [one] => one.text.clone(),
        _ => vals
            .iter()
            .map(Token::written)
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn parse_bool(name: &str, tok: &Token, loc: &Loc) -> Result<bool, Error> {
    if tok.text.eq_ignore_ascii_case("yes") {
        Ok(true)
    } else if tok.text.eq_ignore_ascii_case("no") {
        Ok(false)
    } else {
        Err(Error::at(
            loc,
            format!("'{name}:' must be yes or no, not '{}'", tok.text),
        ))
    }
}

/// An `http-endpoint:` value: an absolute path of visible ASCII without a query or a
/// fragment (the request's path is compared with it byte for byte).
fn http_endpoint(name: &str, v: &str, loc: &Loc) -> Result<String, Error> {
    let ok = v.starts_with('/')
        && v.len() <= 255
        && v.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#');
    if ok {
        Ok(v.to_string())
    } else {
        Err(Error::at(
            loc,
            format!(
                "'{name}:' must be a path like /dns-query (visible ASCII, no '?' or '#', at \
                 most 255 bytes), not '{v}'"
            ),
        ))
    }
}

/// A decimal number in `lo..=hi`.
/// Checks a `sync: from:` value ([`SyncUrl`]).
fn check_sync_url(v: &str) -> Result<(), String> {
    SyncUrl::parse(v).map(|_| ())
}

fn ranged(name: &str, tok: &Token, lo: u64, hi: u64, loc: &Loc) -> Result<u64, Error> {
    let text = &tok.text;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::at(
            loc,
            format!("'{name}:' must be a decimal number, not '{text}'"),
        ));
    }
    match text.parse::<u64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(Error::at(
            loc,
            if hi == u64::MAX {
                format!("'{name}:' value {text} is out of range (at least {lo})")
            } else {
                format!("'{name}:' value {text} is out of range ({lo}-{hi})")
            },
        )),
    }
}

/// A decimal number that fits in a `u32`.
fn ranged_u32(name: &str, tok: &Token, loc: &Loc) -> Result<u32, Error> {
    ranged(name, tok, 0, u32::MAX.into(), loc).map(|v| v as u32)
}

/// The roles an API token may have.
/// `sync` is the follower's role (`GET /sync` only: docs/ha.md).
const TOKEN_ROLES: [&str; 5] = ["read", "dns", "operator", "admin", "sync"];

/// Checks the shape of an `api:` `token: "NAME ROLE SECRET"` (the daemon parses it): three
/// words separated by single spaces, a known role, a secret given by reference. The secret
/// word is never repeated in an error: it may be a token written by mistake.
fn check_token(name: &str, value: &str, loc: &Loc) -> Result<(), Error> {
    let words: Vec<&str> = value.split(' ').collect();
    let shape_ok = words
        .iter()
        .all(|w| !w.is_empty() && !w.contains(char::is_whitespace));
    let (true, &[_, role, secret]) = (shape_ok, &words[..]) else {
        return Err(Error::at(
            loc,
            format!(
                "'{name}:' must be \"NAME ROLE SECRET\": three words separated by single spaces"
            ),
        ));
    };
    if !TOKEN_ROLES.contains(&role) {
        return Err(Error::at(
            loc,
            format!(
                "'{name}:' role '{role}' is not one of {}",
                TOKEN_ROLES.join(", ")
            ),
        ));
    }
    if let Some(hex) = secret.strip_prefix("sha256:") {
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::at(
                loc,
                format!("'{name}:' secret 'sha256:' must be followed by 64 hex digits"),
            ));
        }
        return Ok(());
    }
    let by_reference = ["env:", "file:"]
        .iter()
        .any(|p| secret.strip_prefix(p).is_some_and(|r| !r.is_empty()));
    if !by_reference {
        return Err(Error::at(
            loc,
            format!(
                "'{name}:' secret must be sha256:HEX, env:VAR or file:PATH (the token itself \
                 is never written in the configuration)"
            ),
        ));
    }
    Ok(())
}

/// A slab (shard) count: a decimal number, at least 1, a power of 2 (as Unbound).
fn slabs(name: &str, tok: &Token, loc: &Loc) -> Result<usize, Error> {
    let v = ranged(name, tok, 1, u32::MAX.into(), loc)?;
    if !v.is_power_of_two() {
        return Err(Error::at(
            loc,
            format!("'{name}:' value {v} is not a power of 2"),
        ));
    }
    to_usize(name, v, loc)
}

/// An `outgoing-port-permit:`/`outgoing-port-avoid:` value: `PORT` or `LOW-HIGH`, decimal
/// 0-65535, no spaces, `LOW <= HIGH`.
fn parse_port_rule(
    name: &str,
    tok: &Token,
    action: PortAction,
    loc: &Loc,
) -> Result<PortRule, Error> {
    let text = tok.text.as_str();
    let port = |p: &str| {
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u16>().ok())
            .flatten()
    };
    let (low, high) = match text.split_once('-') {
        Some((l, h)) => (port(l), port(h)),
        None => (port(text), port(text)),
    };
    let (Some(low), Some(high)) = (low, high) else {
        return Err(Error::at(
            loc,
            format!(
                "'{name}:' must be a port or a range LOW-HIGH of ports 0-65535 without \
                 spaces, not '{text}'"
            ),
        ));
    };
    if low > high {
        return Err(Error::at(
            loc,
            format!("'{name}:' range '{text}' is empty (its first port is above its last)"),
        ));
    }
    Ok(PortRule { action, low, high })
}

/// Splits `X[@PORT][#TLS-NAME]` as Unbound's `authextstrtoaddr`: the first `@` ends `X` and
/// starts the port, a `#` after it starts the TLS name; without `@`, the first `#` ends `X`.
/// Checks the port (1-65535) and that a TLS name is not empty.
fn split_upstream<'a>(
    name: &str,
    text: &'a str,
    loc: &Loc,
) -> Result<(&'a str, Option<u16>, Option<String>), Error> {
    let (host, port, tls) = match text.split_once('@') {
        Some((host, rest)) => match rest.split_once('#') {
            Some((port, tls)) => (host, Some(port), Some(tls)),
            None => (host, Some(rest), None),
        },
        None => match text.split_once('#') {
            Some((host, tls)) => (host, None, Some(tls)),
            None => (text, None, None),
        },
    };
    let port = match port {
        None => None,
        Some(p) => {
            let ok = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
            match ok.then(|| p.parse::<u16>().ok()).flatten() {
                Some(port) if port != 0 => Some(port),
                _ => {
                    return Err(Error::at(
                        loc,
                        format!("'{name}:' '{text}': port '{p}' is not a number from 1 to 65535"),
                    ));
                }
            }
        }
    };
    if tls == Some("") {
        return Err(Error::at(
            loc,
            format!("'{name}:' '{text}': empty TLS name after '#'"),
        ));
    }
    Ok((host, port, tls.map(str::to_owned)))
}

/// A `forward-addr:`/`stub-addr:` value: `IP[@PORT][#TLS-NAME]`.
fn parse_upstream_addr(
    name: &str,
    text: &str,
    kind: ZoneKind,
    loc: &Loc,
) -> Result<UpstreamAddr, Error> {
    let (ip, port, tls_name) = split_upstream(name, text, loc)?;
    if let Some((_, scope)) = ip.split_once('%') {
        return Err(Error::at(
            loc,
            format!("'{name}:' '{text}': an IPv6 scope ('%{scope}') is not supported"),
        ));
    }
    let ip = ip.parse().map_err(|_| {
        Error::at(
            loc,
            format!(
                "'{name}:' '{text}': '{ip}' is not an IP address (write IP, IP@PORT, \
                 IP#TLS-NAME or IP@PORT#TLS-NAME; a host name goes in '{}-host:')",
                zone_prefix(kind)
            ),
        )
    })?;
    Ok(UpstreamAddr { ip, port, tls_name })
}

/// A `forward-host:`/`stub-host:` value: `NAME[@PORT][#TLS-NAME]`; the name is kept as
/// written.
fn parse_upstream_host(name: &str, text: &str, loc: &Loc) -> Result<UpstreamHost, Error> {
    let (host, port, tls_name) = split_upstream(name, text, loc)?;
    if host.is_empty() {
        return Err(Error::at(loc, format!("'{name}:' '{text}': no host name")));
    }
    Ok(UpstreamHost {
        name: host.to_owned(),
        port,
        tls_name,
    })
}

fn to_usize(name: &str, v: u64, loc: &Loc) -> Result<usize, Error> {
    usize::try_from(v).map_err(|_| Error::at(loc, format!("'{name}:' value {v} is too large")))
}

/// A memory size as Unbound's `cfg_parse_memsize`: digits, then optionally `k`, `m` or `g`
/// (any case, powers of 1024), optionally followed by `b`. 0 is `None` ("system value").
fn parse_size(name: &str, tok: &Token, loc: &Loc) -> Result<Option<usize>, Error> {
    let bad = || {
        Error::at(
            loc,
            format!(
                "'{name}:' must be a size (a number of bytes, or with k, m or g as in '4m'), \
                 not '{}'",
                tok.text
            ),
        )
    };
    let mut s = tok.text.trim_end_matches(' ');
    if s.len() > 1 {
        s = s.strip_suffix(['b', 'B']).unwrap_or(s);
    }
    let shift = match s.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => 10,
        Some('m') => 20,
        Some('g') => 30,
        Some(c) if c.is_ascii_digit() => 0,
        _ => return Err(bad()),
    };
    if shift != 0 {
        s = s[..s.len() - 1].trim_end_matches(' ');
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let bytes = s
        .parse::<usize>()
        .ok()
        .and_then(|v| v.checked_mul(1 << shift))
        .ok_or_else(|| Error::at(loc, format!("'{name}:' size '{}' is too large", tok.text)))?;
    Ok((bytes != 0).then_some(bytes))
}

#[cfg(test)]
mod tests;
