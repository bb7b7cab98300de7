//! RFC 1035 §5 master files ("zone files"), read in one streaming pass.
//!
//! What this module does:
//!
//! - Reads entries as RFC 1035 §5.1 defines them: `;` comments, `( … )` spanning lines, quoted
//!   strings (which may hold `;` and parentheses), `\X` / `\DDD` escapes, `@` for the origin,
//!   relative names completed with the current origin, a blank owner (line starting with a
//!   blank) meaning the previous owner, and TTL and class in either order.
//! - Handles the `$ORIGIN`, `$TTL` (RFC 2308 §4) and `$INCLUDE file [origin]` directives.
//!   Included text comes from an [`IncludeLoader`] (this crate does no I/O); errors inside it
//!   name the included file and its own line numbers; nesting stops at [`MAX_INCLUDE_DEPTH`].
//!   An included file starts with a copy of the includer's state (origin — or the one given on
//!   the `$INCLUDE` line —, `$TTL`, previous owner, TTL and class); changes made inside it do
//!   not leak back (RFC 1035 §5.1: the origin "reverts" after the include).
//! - Hands every record to a sink as an [`Rr`] with uncompressed RDATA (see [`crate::text`]),
//!   without collecting them: the only allocations per record are the owner and RDATA vectors.
//!
//! TTL of a record without one, in order: the `$TTL` in effect (RFC 2308 §4); else the TTL of
//! the previous record (RFC 1035 §5.1); else, for an SOA record, its MINIMUM field, as BIND
//! does; else the record is an error.
//!
//! What it does not do: classes other than IN are refused, as are `$GENERATE` and other
//! non-standard directives. Zone content (one SOA at the apex, names inside the zone, CNAME
//! exclusivity, glue) is checked by the store, not here.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::name::WireName;
use crate::rr::{Rr, class, rtype, soa_minimum};
use crate::text::{
    Lexer, Tok, parse_head, parse_ttl, push_name, push_unescaped, rdata_into, wire_name,
};

/// How deep `$INCLUDE` may nest (the top-level file is depth 0).
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// A zone file error: the file (display name), the line where the offending record or
/// directive starts (1-based) and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneFileError {
    /// Display name of the file, as the caller or the [`IncludeLoader`] named it.
    pub file: String,
    /// Line where the record or directive starts.
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for ZoneFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.msg)
    }
}

impl core::error::Error for ZoneFileError {}

/// Supplies the text of `$INCLUDE`d files.
pub trait IncludeLoader {
    /// Loads `path` as written in the `$INCLUDE` line. Returns the name to use in error
    /// messages and the file's contents, or a reason for refusing.
    fn load(&mut self, path: &str) -> Result<(String, String), String>;
}

/// An [`IncludeLoader`] that refuses every `$INCLUDE`.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoIncludes;

impl IncludeLoader for NoIncludes {
    fn load(&mut self, _path: &str) -> Result<(String, String), String> {
        Err("$INCLUDE is not allowed here".to_string())
    }
}

/// Parser state carried from record to record (and copied into included files).
#[derive(Clone)]
struct State {
    origin: WireName,
    /// `$TTL` in effect.
    default_ttl: Option<u32>,
    /// TTL of the previous record.
    last_ttl: Option<u32>,
    /// Owner of the previous record in wire form (empty before the first record); a reused
    /// buffer, so that a blank owner costs no allocation beyond the record's own.
    last_owner: Vec<u8>,
    last_class: u16,
}

/// Reads a master file and hands each record to `sink`, in file order.
///
/// `file` names the text in error messages; `origin` is the initial `$ORIGIN` (usually the zone
/// apex). `$INCLUDE` goes through `loader` (use [`NoIncludes`] to forbid it). A sink error stops
/// the parse and is reported at the record's line. Returns the number of records read,
/// included files counted.
pub fn parse_zone(
    text: &str,
    file: &str,
    origin: &WireName,
    loader: &mut dyn IncludeLoader,
    sink: &mut dyn FnMut(Rr) -> Result<(), String>,
) -> Result<usize, ZoneFileError> {
    let mut state = State {
        origin: origin.clone(),
        default_ttl: None,
        last_ttl: None,
        last_owner: Vec::new(),
        last_class: class::IN,
    };
    let mut count = 0usize;
    parse_file(text, file, &mut state, loader, sink, 0, &mut count)?;
    Ok(count)
}

fn parse_file(
    text: &str,
    file: &str,
    st: &mut State,
    loader: &mut dyn IncludeLoader,
    sink: &mut dyn FnMut(Rr) -> Result<(), String>,
    depth: usize,
    count: &mut usize,
) -> Result<(), ZoneFileError> {
    let fail = |line: usize, msg: String| ZoneFileError {
        file: file.to_string(),
        line,
        msg,
    };
    let mut lexer = Lexer::new(text, true);
    let mut toks: Vec<Tok<'_>> = Vec::with_capacity(16);
    let mut scratch = Scratch {
        owner: Vec::with_capacity(256),
        rdata: Vec::with_capacity(512),
    };
    loop {
        let entry = match lexer.next_entry(&mut toks) {
            Ok(Some(e)) => e,
            Ok(None) => return Ok(()),
            Err(e) => return Err(fail(e.line, e.msg)),
        };
        let line = entry.line;
        let Some(&first) = toks.first() else { continue };
        if !entry.blank_owner && !first.quoted && first.text.starts_with('$') {
            match directive(&toks, st).map_err(|m| fail(line, m))? {
                None => {}
                Some((path, inc_origin)) => {
                    if depth >= MAX_INCLUDE_DEPTH {
                        return Err(fail(
                            line,
                            format!("$INCLUDE nested more than {MAX_INCLUDE_DEPTH} levels deep"),
                        ));
                    }
                    let (name, contents) = loader
                        .load(&path)
                        .map_err(|m| fail(line, format!("cannot include '{path}': {m}")))?;
                    let mut child = st.clone();
                    if let Some(o) = inc_origin {
                        child.origin = o;
                    }
                    parse_file(&contents, &name, &mut child, loader, sink, depth + 1, count)?;
                }
            }
            continue;
        }
        let rr = record(&toks, entry.blank_owner, st, &mut scratch).map_err(|m| fail(line, m))?;
        *count += 1;
        sink(rr).map_err(|m| fail(line, m))?;
    }
}

/// Applies `$ORIGIN` / `$TTL`; returns the file and origin of an `$INCLUDE`.
#[allow(clippy::type_complexity)]
fn directive(
    toks: &[Tok<'_>],
    st: &mut State,
) -> Result<Option<(String, Option<WireName>)>, String> {
    let Some((first, args)) = toks.split_first() else {
        return Ok(None);
    };
    let name = first.text;
    if let Some(q) = args
        .iter()
        .find(|t| t.quoted && !name.eq_ignore_ascii_case("$INCLUDE"))
    {
        return Err(format!("unexpected quoted string \"{}\" in {name}", q.text));
    }
    let parse_origin = |text: &str, st: &State| -> Result<WireName, String> {
        let mut v = Vec::new();
        push_name(text, Some(&st.origin), &mut v)
            .map_err(|e| format!("bad origin '{text}': {e}"))?;
        wire_name(&v).map_err(|e| e.0)
    };
    if name.eq_ignore_ascii_case("$ORIGIN") {
        let [arg] = args else {
            return Err("$ORIGIN takes exactly one domain name".to_string());
        };
        st.origin = parse_origin(arg.text, st)?;
        Ok(None)
    } else if name.eq_ignore_ascii_case("$TTL") {
        let [arg] = args else {
            return Err("$TTL takes exactly one TTL".to_string());
        };
        st.default_ttl =
            Some(parse_ttl(arg.text).ok_or_else(|| format!("bad $TTL '{}'", arg.text))?);
        Ok(None)
    } else if name.eq_ignore_ascii_case("$INCLUDE") {
        let (path, origin) = match args {
            [p] => (p, None),
            [p, o] if !o.quoted => (p, Some(parse_origin(o.text, st)?)),
            _ => return Err("$INCLUDE takes a file name and an optional origin".to_string()),
        };
        let mut bytes = Vec::new();
        if push_unescaped(path.text, &mut bytes).is_none() {
            return Err(format!("bad escape in $INCLUDE file name '{}'", path.text));
        }
        let path =
            String::from_utf8(bytes).map_err(|_| "$INCLUDE file name is not UTF-8".to_string())?;
        Ok(Some((path, origin)))
    } else if name.eq_ignore_ascii_case("$GENERATE") {
        Err("$GENERATE is not supported".to_string())
    } else {
        Err(format!("unknown directive '{name}'"))
    }
}

/// Buffers reused from record to record; each record's owner and RDATA are copied out of them
/// at their exact size (one allocation each, never a regrowth).
struct Scratch {
    owner: Vec<u8>,
    rdata: Vec<u8>,
}

/// One record entry: `[owner] [TTL] [CLASS] TYPE RDATA`.
fn record(
    toks: &[Tok<'_>],
    blank_owner: bool,
    st: &mut State,
    scratch: &mut Scratch,
) -> Result<Rr, String> {
    let at = if blank_owner {
        if st.last_owner.is_empty() {
            return Err(
                "the first record has no owner name (the line starts with a blank)".to_string(),
            );
        }
        0
    } else {
        let Some(&owner) = toks.first() else {
            return Err("empty record".to_string());
        };
        if owner.quoted {
            return Err(format!(
                "owner name must not be quoted (got \"{}\")",
                owner.text
            ));
        }
        scratch.owner.clear();
        push_name(owner.text, Some(&st.origin), &mut scratch.owner)
            .map_err(|e| format!("bad owner name '{}': {e}", owner.text))?;
        1
    };
    let head = parse_head(toks, at).map_err(|e| e.0)?;
    let cls = head.class.unwrap_or(st.last_class);
    if cls != class::IN {
        return Err(format!(
            "class {} is not supported (only IN)",
            class_name(cls)
        ));
    }
    let rdata = &mut scratch.rdata;
    rdata_into(head.rtype, &toks[head.rdata..], Some(&st.origin), rdata).map_err(|e| e.0)?;
    let ttl = match (head.ttl, st.default_ttl, st.last_ttl) {
        (Some(t), _, _) | (None, Some(t), _) | (None, None, Some(t)) => t,
        (None, None, None) => match head.rtype {
            rtype::SOA => soa_minimum(rdata).unwrap_or(0).min(0x7fff_ffff),
            _ => {
                return Err(
                    "no TTL given, no $TTL in effect and no previous record to take it from"
                        .to_string(),
                );
            }
        },
    };
    if !blank_owner {
        core::mem::swap(&mut st.last_owner, &mut scratch.owner);
    }
    let owner = wire_name(&st.last_owner).map_err(|e| e.0)?;
    st.last_ttl = Some(ttl);
    st.last_class = cls;
    Ok(Rr {
        owner,
        rtype: head.rtype,
        class: cls,
        ttl,
        rdata: rdata.to_vec(),
    })
}

fn class_name(c: u16) -> String {
    match c {
        class::CH => "CH".to_string(),
        2 => "CS".to_string(),
        4 => "HS".to_string(),
        _ => format!("CLASS{c}"),
    }
}

#[cfg(test)]
mod tests;
