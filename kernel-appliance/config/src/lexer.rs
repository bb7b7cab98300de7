//! Splits one line of an Unbound configuration file into tokens.
//!
//! The rules follow Unbound's flex lexer (`util/configlexer.lex`):
//!
//! - spaces, tabs and carriage returns separate tokens;
//! - `#` at the start of a token starts a comment that runs to the end of the line; a `#`
//!   *inside* a bare token is part of it (`primary: 192.0.2.1@853#tls.example.` keeps the
//!   TLS name);
//! - `"..."` and `'...'` are quoted values: the quotes are removed, the text inside is kept
//!   verbatim (a `#` or the other quote character is not special, `\x` is kept as the two
//!   characters `\x` and does not end the string);
//! - a quote character ends a bare token and starts a quoted one;
//! - a quoted string must end on the line where it starts (Unbound reports "newline inside
//!   quoted string" too).

/// One token of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    /// The text, without the quotes if it was quoted.
    pub(crate) text: String,
    /// The quote character (`"` or `'`) if the token was quoted.
    pub(crate) quote: Option<char>,
}

impl Token {
    /// A bare (unquoted) token.
    pub(crate) fn bare(text: impl Into<String>) -> Self {
        Token {
            text: text.into(),
            quote: None,
        }
    }

    /// Whether the token was written in quotes.
    pub(crate) fn is_quoted(&self) -> bool {
        self.quote.is_some()
    }

    /// The token as it could be written back (quoted tokens get their quotes back).
    pub(crate) fn written(&self) -> String {
        match self.quote {
            Some(q) => format!("{q}{}{q}", self.text),
            None => self.text.clone(),
        }
    }
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r')
}

/// Tokenizes one line (without its `\n`). The error is the reason, without location.
pub(crate) fn tokenize(line: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|&c| is_space(c)).is_some() {}
        let Some(first) = chars.next() else { break };
        match first {
            '#' => break,
            '"' | '\'' => {
                let mut text = String::new();
                loop {
                    match chars.next() {
                        None => {
                            return Err(format!(
                                "unterminated quoted string (missing closing {first} on this line)"
                            ));
                        }
                        Some(c) if c == first => break,
                        Some('\\') => {
                            text.push('\\');
                            if let Some(c) = chars.next() {
                                text.push(c);
                            }
                        }
                        Some(c) => text.push(c),
                    }
                }
                tokens.push(Token {
                    text,
                    quote: Some(first),
                });
            }
            _ => {
                let mut text = String::new();
                let mut c = first;
                loop {
                    text.push(c);
                    if c == '\\'
                        && let Some(escaped) = chars.next()
                    {
                        text.push(escaped);
                    }
                    match chars.next_if(|&n| !is_space(n) && n != '"' && n != '\'') {
                        Some(n) => c = n,
                        None => break,
                    }
                }
                tokens.push(Token::bare(text));
            }
        }
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<String> {
        tokenize(line)
            .unwrap()
            .into_iter()
            .map(|t| t.written())
            .collect()
    }

    #[test]
    fn splits_on_whitespace_and_strips_comments() {
        assert_eq!(texts("  port:\t53   # the port"), ["port:", "53"]);
        assert_eq!(texts("# only a comment"), Vec::<String>::new());
        assert_eq!(texts("port: 53 #"), ["port:", "53"]);
        assert_eq!(texts("port: 53\r"), ["port:", "53"]);
    }

    #[test]
    fn hash_inside_a_bare_token_is_kept() {
        assert_eq!(
            texts("primary: 192.0.2.1@853#tls.example. # comment"),
            ["primary:", "192.0.2.1@853#tls.example."]
        );
    }

    #[test]
    fn quotes() {
        let toks = tokenize(r#"local-data: "www.example. A 192.0.2.1" 'a # b' """#).unwrap();
        assert_eq!(toks.len(), 4);
        assert_eq!(toks[1].text, "www.example. A 192.0.2.1");
        assert_eq!(toks[1].quote, Some('"'));
        assert_eq!(toks[2].text, "a # b");
        assert_eq!(toks[2].quote, Some('\''));
        assert_eq!(toks[3].text, "");
        assert!(toks[3].is_quoted());
        // The other quote character and escapes are kept verbatim.
        let toks = tokenize(r#"x: 'example. TXT "a \' b"' "c\"d""#).unwrap();
        assert_eq!(toks[1].text, r#"example. TXT "a \' b""#);
        assert_eq!(toks[2].text, r#"c\"d"#);
        // A quote ends a bare token.
        assert_eq!(texts(r#"ab"cd"ef"#), ["ab", "\"cd\"", "ef"]);
    }

    #[test]
    fn unterminated_quote_is_an_error() {
        let err = tokenize(r#"local-data: "www.example. A 192.0.2.1"#).unwrap_err();
        assert!(err.starts_with("unterminated quoted string"), "{err}");
        assert!(tokenize("x: 'abc").is_err());
        assert!(tokenize(r#"x: "abc\""#).is_err());
    }
}
