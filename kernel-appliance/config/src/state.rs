//! The API state file: the local zones and records skuad's REST API added, kept as a
//! deliberately **narrow** fragment of `unbound.conf`.
//!
//! skuad writes the file; a person may read it (and edit it while skuad is stopped). Because
//! what it holds comes from API callers, the format is closed in both directions:
//!
//! - [`render`] writes one directive per line, `local-zone: 'NAME' TYPE` and
//!   `local-data: 'RR'`, each value in single quotes with every `'`, control byte and
//!   non-ASCII byte written as an RFC 1035 §5.1 `\DDD` escape. The configuration lexer keeps a
//!   quoted value verbatim up to the next `'` (it never unescapes), so a rendered value
//!   contains no `'`, cannot end early, and cannot start a second directive on its line. The
//!   value's reader, the RFC 1035 presentation-format parser, reads `\039` as `'`: the value
//!   means exactly what it meant before quoting.
//! - [`parse`] reads only that grammar: comment and blank lines, one `server:` line first,
//!   then `local-zone:` lines with two values and `local-data:` lines with one, one
//!   directive per line. Anything else — `include:`, another clause or directive, a second
//!   directive on a line, a missing or extra value — is an error naming the file and line.
//!   A state file never makes skuad open another file.
//!
//! This module knows nothing of DNS: callers pass presentation-format text and check zone
//! names, zone types and records themselves (skuad does, with skua-engine, at every load).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use crate::lexer;
use crate::model::{Error, Loc, Located};

/// The header [`render`] writes, one comment per line.
const HEADER: &str = "\
# skuad API state: local zones and records added through the REST API.
# Written by skuad (atomically) before each change is served; read after the
# main configuration at start and reload. Edit only while skuad is stopped.
";

/// Lines of [`HEADER`] plus the `server:` line: the first directive is on the line after.
pub const FIRST_ENTRY_LINE: usize = 5;

/// What a state file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateFile {
    /// `local-zone:` values: (name, type), as written (presentation format, unquoted).
    pub zones: Vec<Located<(String, String)>>,
    /// `local-data:` values, as written (presentation format, unquoted).
    pub records: Vec<Located<String>>,
}

/// `value` in single quotes, safe for the configuration lexer whatever it holds (see the
/// module docs): `'`, bytes below 0x20, 0x7f and every byte of a non-ASCII character become
/// `\DDD`, also where an escape already precedes them (`\'` means `'` and becomes `\039`).
/// An escape is otherwise copied as it is, so every `\` in the result is followed by a
/// printable character other than `'`: the lexer, which keeps `\x` as two characters,
/// can never take the closing quote for part of the value. For values in RFC 1035
/// presentation format, where `\DDD` is the byte DDD and `\X` the character X, without raw
/// control bytes (canonical text, as `skua_engine::text::rr_to_string` writes, has none): a
/// raw tab separates fields outside an RFC 1035 quoted string and is a byte inside one, so
/// its escape keeps the line one value but may change what the value means.
pub fn quote(value: &str) -> String {
    fn plain(b: u8) -> bool {
        b != b'\'' && (0x20..0x7f).contains(&b)
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    let mut bytes = value.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(c) if plain(c) => {
                    out.push('\\');
                    out.push(char::from(c));
                }
                Some(c) => {
                    let _ = write!(out, "\\{c:03}");
                }
                // A lone backslash at the end (not valid presentation text): kept as the
                // character it would be, a backslash.
                None => out.push_str("\\092"),
            },
            _ if plain(b) => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\{b:03}");
            }
        }
    }
    out.push('\'');
    out
}

/// The file's text for these zones (name, type) and records, in order. Entry `i` (zones
/// first, then records) is on line [`FIRST_ENTRY_LINE`] + `i`.
///
/// A zone type is written bare: it must be a word (letters, digits, `_`, `-`), which every
/// Unbound local-zone type is. Anything else is written quoted, which [`parse`] refuses: a
/// caller that did not check the type gets an error at the next load, never a directive.
pub fn render<'a>(
    zones: impl IntoIterator<Item = (&'a str, &'a str)>,
    records: impl IntoIterator<Item = &'a str>,
) -> String {
    let mut out = String::from(HEADER);
    out.push_str("server:\n");
    for (name, ty) in zones {
        let ty = if is_word(ty) {
            ty.to_string()
        } else {
            quote(ty)
        };
        let _ = writeln!(out, "    local-zone: {} {ty}", quote(name));
    }
    for r in records {
        let _ = writeln!(out, "    local-data: {}", quote(r));
    }
    out
}

/// A zone type as the state file holds it.
fn is_word(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Reads a state file's text; `file` names it in locations and errors.
///
/// # Errors
///
/// The first line outside the grammar of the module docs, as `file:line: reason`.
pub fn parse(text: &str, file: &Path) -> Result<StateFile, Error> {
    let file: Arc<Path> = file.into();
    let mut out = StateFile::default();
    let mut seen_server = false;
    for (i, line) in text.split('\n').enumerate() {
        let loc = Loc {
            file: file.clone(),
            line: i + 1,
        };
        let toks = lexer::tokenize(line).map_err(|e| Error::at(&loc, e))?;
        let Some(first) = toks.first() else { continue };
        let name = if first.is_quoted() {
            ""
        } else {
            first.text.as_str()
        };
        let values: Vec<String> = toks[1..].iter().map(|t| t.text.clone()).collect();
        let want = |n: usize| -> Result<(), Error> {
            if values.len() == n {
                return Ok(());
            }
            Err(Error::at(
                &loc,
                format!(
                    "'{name}' takes {n} value{} in the API state file, found {} (one directive per line)",
                    if n == 1 { "" } else { "s" },
                    values.len()
                ),
            ))
        };
        match name {
            "server:" if !seen_server => {
                want(0)?;
                seen_server = true;
            }
            "local-zone:" | "local-data:" if !seen_server => {
                return Err(Error::at(&loc, format!("'{name}' before 'server:'")));
            }
            "local-zone:" => {
                want(2)?;
                if toks[2].is_quoted() || !is_word(&values[1]) {
                    let shown: String = values[1].chars().take(40).collect();
                    return Err(Error::at(
                        &loc,
                        format!(
                            "local-zone type '{}' is not a word (letters, digits, '_', '-')",
                            shown.escape_debug()
                        ),
                    ));
                }
                out.zones.push(Located {
                    value: (values[0].clone(), values[1].clone()),
                    loc,
                });
            }
            "local-data:" => {
                want(1)?;
                out.records.push(Located {
                    value: values[0].clone(),
                    loc,
                });
            }
            _ => {
                let shown: String = first.text.chars().take(40).collect();
                return Err(Error::at(
                    &loc,
                    format!(
                        "the API state file holds only 'server:', 'local-zone:' and 'local-data:' lines; found '{}'",
                        shown.escape_debug()
                    ),
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<StateFile, Error> {
        parse(text, Path::new("state.conf"))
    }

    #[test]
    fn render_then_parse() {
        let text = render(
            [("example.org.", "static")],
            [
                "t.example.org. 300 IN TXT \"it's\"",
                "a'b.example.org. 300 IN TXT \"x\\\"y\" \"\\\\\"",
                "w.example.org. 300 IN A 198.18.0.1",
            ],
        );
        let s = p(&text).unwrap();
        assert_eq!(s.zones.len(), 1);
        assert_eq!(s.zones[0].loc.line, FIRST_ENTRY_LINE);
        assert_eq!(s.records[0].loc.line, FIRST_ENTRY_LINE + 1);
        assert_eq!(s.records[0].value, "t.example.org. 300 IN TXT \"it\\039s\"");
        assert_eq!(
            s.records[1].value,
            "a\\039b.example.org. 300 IN TXT \"x\\\"y\" \"\\\\\""
        );
        assert_eq!(s.records[2].value, "w.example.org. 300 IN A 198.18.0.1");
    }

    #[test]
    fn quoting_leaves_no_quote_or_control_byte() {
        let q = quote("a'b\"c\nd\te\u{7f}é\\' \\\\ \\1\\");
        assert_eq!(
            q,
            "'a\\039b\"c\\010d\\009e\\127\\195\\169\\039 \\\\ \\1\\092'"
        );
        let inner = &q[1..q.len() - 1];
        assert!(!inner.contains('\''));
        assert!(inner.bytes().all(|b| (0x20..0x7f).contains(&b)));
    }

    #[test]
    fn injection_is_a_value_not_a_directive() {
        // What the review found: a record that closed its quote and went on with
        // `include:` on the same line. Rendered, it stays one value.
        let evil = "x.test. 300 IN TXT \"' include: /etc/shadow '\"";
        let text = render([], [evil]);
        let s = p(&text).unwrap();
        assert_eq!(s.records.len(), 1);
        assert!(s.records[0].value.contains("include: /etc/shadow"));
        assert!(!text.lines().any(|l| l.trim_start().starts_with("include:")));
    }

    #[test]
    fn anything_outside_the_grammar_is_refused_with_its_line() {
        let cases = [
            ("server:\ninclude: /etc/passwd\n", 2, "holds only"),
            (
                "server:\n local-data: 'a. A 198.18.0.1' include: /x\n",
                2,
                "takes 1",
            ),
            (
                "server:\n local-data: 'a. A 198.18.0.1' 'b'\n",
                2,
                "takes 1",
            ),
            ("server:\n local-zone: 'a.' static extra\n", 2, "takes 2"),
            ("server:\n local-zone: 'a.'\n", 2, "takes 2"),
            ("server:\n local-zone: 'a.' 'static'\n", 2, "not a word"),
            ("server:\n local-zone: 'a.' st\0atic\n", 2, "not a word"),
            ("local-data: 'a. A 198.18.0.1'\n", 1, "before 'server:'"),
            ("server:\nserver:\n", 2, "holds only"),
            ("server:\nforward-zone:\n", 2, "holds only"),
            ("server:\n local-data: 'a. TXT \"x\n", 2, "unterminated"),
            ("server:\n verbosity: 5\n", 2, "holds only"),
            ("server: local-data: 'a. A 198.18.0.1'\n", 1, "takes 0"),
        ];
        for (text, line, why) in cases {
            let e = p(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.msg.contains(why), "{text:?}: {e}");
            assert!(e.to_string().starts_with("state.conf:"), "{e}");
        }
        // Comments, blank lines and indentation are fine.
        let s = p("# c\n\nserver:\n\n  # c\n\tlocal-data: \"a. A 198.18.0.1\" # c\n").unwrap();
        assert_eq!(s.records[0].value, "a. A 198.18.0.1");
        assert_eq!(s.records[0].loc.line, 6);
        assert_eq!(p("").unwrap(), StateFile::default());
    }
}
