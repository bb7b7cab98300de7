use super::*;

fn tok(s: &str) -> Token {
    Token::bare(s)
}

#[test]
fn sizes() {
    let loc = Loc::new("t", 1);
    let size = |s: &str| parse_size("so-rcvbuf", &tok(s), &loc);
    assert_eq!(size("4m").unwrap(), Some(4 << 20));
    assert_eq!(size("4M").unwrap(), Some(4 << 20));
    assert_eq!(size("4mb").unwrap(), Some(4 << 20));
    assert_eq!(size("512k").unwrap(), Some(512 << 10));
    assert_eq!(size("1g").unwrap(), Some(1 << 30));
    assert_eq!(size("2 MB").unwrap(), Some(2 << 20));
    assert_eq!(size("1232").unwrap(), Some(1232));
    assert_eq!(size("0").unwrap(), None);
    for bad in ["", "m", "4x", "-4m", "4.5m", "kb", "99999999999999999999g"] {
        assert!(size(bad).is_err(), "{bad:?} should be rejected");
    }
    assert_eq!(
        size("4x").unwrap_err().msg,
        "'so-rcvbuf:' must be a size (a number of bytes, or with k, m or g as in '4m'), \
         not '4x'"
    );
}

#[test]
fn braces_and_tilde() {
    assert_eq!(expand_braces("a{b,c}d"), ["abd", "acd"]);
    assert_eq!(
        expand_braces("{x,y{1,2}}.conf"),
        ["x.conf", "y1.conf", "y2.conf"]
    );
    assert_eq!(expand_braces("{a,b}{c,d}"), ["ac", "ad", "bc", "bd"]);
    assert_eq!(expand_braces("no{brace"), ["no{brace"]);
    assert_eq!(expand_braces("plain"), ["plain"]);
    if let Some(home) = std::env::var_os("HOME") {
        let home = home.to_string_lossy().into_owned();
        assert_eq!(expand_tilde("~/x.conf"), format!("{home}/x.conf"));
    }
    assert_eq!(expand_tilde("a~b"), "a~b");
}

#[test]
fn loose_counts() {
    let toks = |s: &str| crate::lexer::tokenize(s).unwrap();
    assert_eq!(loose_count(&toks(""), 1), 0);
    assert_eq!(loose_count(&toks("1 2 3"), 1), 3);
    assert_eq!(loose_count(&toks("1 2 port: 53"), 1), 2);
    assert_eq!(loose_count(&toks("port: 53"), 1), 0);
    assert_eq!(loose_count(&toks("frob: 53"), 1), 2);
    assert_eq!(loose_count(&toks("fe80:0::1 x"), 1), 2);
    assert_eq!(loose_count(&toks("port: 53"), 2), 2);
    assert_eq!(loose_count(&toks("a b c frob: 1"), 2), 3);
}

#[test]
fn directive_lookalikes() {
    assert!(looks_like_directive(&tok("port:")));
    assert!(looks_like_directive(&tok("port:53")));
    assert!(!looks_like_directive(&tok("::1")));
    assert!(!looks_like_directive(&tok("fe80::1")));
    assert!(!looks_like_directive(&tok("2001:db8::1")));
    assert!(!looks_like_directive(&tok("allow")));
    assert!(!looks_like_directive(&Token {
        text: "port:".into(),
        quote: Some('"'),
    }));
}
