//! Domain names in uncompressed wire format (RFC 1035 §3.1).
//!
//! [`WireName`] is the owned, validated form used at load time: absolute, at most 255 octets,
//! labels of at most 63 octets, case preserved. Lookups compare names case-insensitively
//! (RFC 4343) by lower-casing ASCII letters only.

use alloc::vec::Vec;
use core::fmt;

/// Longest name in wire format, root label included (RFC 1035 §2.3.4).
pub const MAX_NAME_LEN: usize = 255;
/// Longest label (RFC 1035 §2.3.4).
pub const MAX_LABEL_LEN: usize = 63;

/// Why a name could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// An empty label inside the name (`a..b`).
    EmptyLabel,
    /// A label longer than 63 octets.
    LabelTooLong,
    /// The whole name is longer than 255 octets.
    NameTooLong,
    /// A `\` escape that is not `\X` or `\DDD` with DDD ≤ 255.
    BadEscape,
    /// Wire bytes that do not form a name (truncated, compression pointer, bad label type).
    BadWire,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::EmptyLabel => "empty label in domain name",
            Self::LabelTooLong => "label longer than 63 octets",
            Self::NameTooLong => "domain name longer than 255 octets",
            Self::BadEscape => "bad escape sequence in domain name",
            Self::BadWire => "malformed wire-format domain name",
        })
    }
}

impl core::error::Error for NameError {}

/// An absolute domain name in uncompressed wire format, case preserved.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WireName(Vec<u8>);

impl WireName {
    /// The root name `.`.
    pub fn root() -> Self {
        Self(alloc::vec![0])
    }

    /// Validates uncompressed wire bytes (the whole slice must be exactly one name).
    pub fn from_wire(bytes: &[u8]) -> Result<Self, NameError> {
        match wire_name_len(bytes) {
            Some(len) if len == bytes.len() => Ok(Self(bytes.to_vec())),
            _ => Err(NameError::BadWire),
        }
    }

    /// Parses presentation format (RFC 1035 §5.1): `\X` and `\DDD` escapes, `@` for the origin.
    /// A name without a trailing dot is relative to `origin`; with no origin it is taken as
    /// absolute, as Unbound does for `local-data`.
    pub fn parse(text: &str, origin: Option<&WireName>) -> Result<Self, NameError> {
        if text == "@" {
            return Ok(origin.cloned().unwrap_or_else(Self::root));
        }
        if text == "." {
            return Ok(Self::root());
        }
        let bytes = text.as_bytes();
        let mut out: Vec<u8> = Vec::with_capacity(bytes.len() + 2);
        let mut label_start = 0usize;
        out.push(0);
        let mut i = 0usize;
        let mut absolute = false;
        while i < bytes.len() {
            let c = bytes[i];
            match c {
                b'.' => {
                    let len = out.len() - label_start - 1;
                    if len == 0 {
                        return Err(NameError::EmptyLabel);
                    }
                    close_label(&mut out, label_start, len)?;
                    if i + 1 == bytes.len() {
                        absolute = true;
                    } else {
                        label_start = out.len();
                        out.push(0);
                    }
                    i += 1;
                    continue;
                }
                b'\\' => {
                    let (b, used) = parse_escape(&bytes[i + 1..])?;
                    out.push(b);
                    i += 1 + used;
                    continue;
                }
                _ => out.push(c),
            }
            i += 1;
        }
        if !absolute {
            let len = out.len() - label_start - 1;
            if len == 0 {
                return Err(NameError::EmptyLabel);
            }
            close_label(&mut out, label_start, len)?;
        }
        match origin {
            Some(o) if !absolute => out.extend_from_slice(o.as_bytes()),
            _ => out.push(0),
        }
        if out.len() > MAX_NAME_LEN {
            return Err(NameError::NameTooLong);
        }
        Ok(Self(out))
    }

    /// The wire bytes, root label included.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Length in wire format.
    #[allow(clippy::len_without_is_empty)] // a name always has at least the root label
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The same name with ASCII letters lower-cased (the lookup key, RFC 4343).
    pub fn to_lowercase(&self) -> Self {
        Self(self.0.iter().map(u8::to_ascii_lowercase).collect())
    }

    /// Number of labels, root excluded (`www.example.` has 2).
    pub fn label_count(&self) -> usize {
        labels(&self.0).count()
    }

    /// True for the root name.
    pub fn is_root(&self) -> bool {
        self.0.len() == 1
    }

    /// The name with its first label removed; the root has no parent.
    pub fn parent(&self) -> Option<Self> {
        if self.is_root() {
            return None;
        }
        let skip = usize::from(self.0[0]) + 1;
        Some(Self(self.0[skip..].to_vec()))
    }

    /// Case-insensitive test that `self` equals `ancestor` or lies below it.
    pub fn is_subdomain_of(&self, ancestor: &WireName) -> bool {
        is_subdomain(&self.0, &ancestor.0)
    }

    /// Prepends one label (`label` must be 1..=63 octets).
    pub fn prepend_label(&self, label: &[u8]) -> Result<Self, NameError> {
        if label.is_empty() {
            return Err(NameError::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(NameError::LabelTooLong);
        }
        let mut out = Vec::with_capacity(self.0.len() + label.len() + 1);
        // Cannot truncate: checked against MAX_LABEL_LEN above.
        out.push(label.len() as u8);
        out.extend_from_slice(label);
        out.extend_from_slice(&self.0);
        if out.len() > MAX_NAME_LEN {
            return Err(NameError::NameTooLong);
        }
        Ok(Self(out))
    }

    /// The first label's bytes (empty for the root).
    pub fn first_label(&self) -> &[u8] {
        let len = usize::from(self.0[0]);
        &self.0[1..1 + len]
    }
}

fn close_label(out: &mut [u8], label_start: usize, len: usize) -> Result<(), NameError> {
    if len > MAX_LABEL_LEN {
        return Err(NameError::LabelTooLong);
    }
    // Cannot truncate: len <= 63.
    out[label_start] = len as u8;
    Ok(())
}

/// Parses the part after a backslash: `\DDD` (decimal, ≤ 255) or `\X`. Returns (byte, bytes used).
fn parse_escape(rest: &[u8]) -> Result<(u8, usize), NameError> {
    match rest {
        [a, b, c, ..] if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
            let v = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
            u8::try_from(v)
                .map(|v| (v, 3))
                .map_err(|_| NameError::BadEscape)
        }
        [d, ..] if d.is_ascii_digit() => Err(NameError::BadEscape),
        [x, ..] => Ok((*x, 1)),
        [] => Err(NameError::BadEscape),
    }
}

/// Length of the uncompressed name at the start of `bytes`, or `None` when it is malformed,
/// compressed or longer than 255 octets.
pub fn wire_name_len(bytes: &[u8]) -> Option<usize> {
    let mut pos = 0usize;
    loop {
        let len = usize::from(*bytes.get(pos)?);
        if len == 0 {
            pos += 1;
            return (pos <= MAX_NAME_LEN).then_some(pos);
        }
        if len > MAX_LABEL_LEN {
            return None;
        }
        pos += 1 + len;
        if pos >= MAX_NAME_LEN {
            return None;
        }
    }
}

/// Iterates over the labels of an uncompressed, valid wire name.
pub fn labels(name: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut pos = 0usize;
    core::iter::from_fn(move || {
        let len = usize::from(*name.get(pos)?);
        if len == 0 {
            return None;
        }
        let label = name.get(pos + 1..pos + 1 + len)?;
        pos += 1 + len;
        Some(label)
    })
}

/// Case-insensitive suffix test on valid uncompressed wire names, respecting label boundaries.
pub fn is_subdomain(name: &[u8], ancestor: &[u8]) -> bool {
    if ancestor.len() > name.len() {
        return false;
    }
    let mut pos = 0usize;
    let offset = name.len() - ancestor.len();
    while pos < offset {
        pos += usize::from(name[pos]) + 1;
    }
    pos == offset && name[offset..].eq_ignore_ascii_case(ancestor)
}

/// Writes `name` in presentation format (RFC 4343 escaping of `.`, `\`, non-printables).
pub fn fmt_wire_name(name: &[u8], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if name.first() == Some(&0) {
        return f.write_str(".");
    }
    for label in labels(name) {
        for &b in label {
            match b {
                b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b' ' | b'@' | b'$' => {
                    write!(f, "\\{}", char::from(b))?
                }
                0x21..=0x7e => write!(f, "{}", char::from(b))?,
                _ => write!(f, "\\{b:03}")?,
            }
        }
        f.write_str(".")?;
    }
    Ok(())
}

impl fmt::Display for WireName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_wire_name(&self.0, f)
    }
}

impl fmt::Debug for WireName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WireName({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn parse_absolute_and_relative() {
        let n = WireName::parse("www.Example.com.", None).unwrap();
        assert_eq!(n.as_bytes(), b"\x03www\x07Example\x03com\x00");
        let origin = WireName::parse("example.com.", None).unwrap();
        let r = WireName::parse("mail", Some(&origin)).unwrap();
        assert_eq!(r.as_bytes(), b"\x04mail\x07example\x03com\x00");
        assert_eq!(WireName::parse("@", Some(&origin)).unwrap(), origin);
        assert_eq!(WireName::parse(".", None).unwrap(), WireName::root());
        // No origin: relative text is absolute (Unbound local-data rule).
        assert_eq!(
            WireName::parse("a.b", None).unwrap().as_bytes(),
            b"\x01a\x01b\x00"
        );
    }

    #[test]
    fn parse_escapes_and_limits() {
        let n = WireName::parse("a\\.b.c.", None).unwrap();
        assert_eq!(n.as_bytes(), b"\x03a.b\x01c\x00");
        let n = WireName::parse("\\065.", None).unwrap();
        assert_eq!(n.as_bytes(), b"\x01A\x00");
        assert_eq!(WireName::parse("\\256.", None), Err(NameError::BadEscape));
        assert_eq!(WireName::parse("a..b.", None), Err(NameError::EmptyLabel));
        let long = "a".repeat(64);
        assert_eq!(WireName::parse(&long, None), Err(NameError::LabelTooLong));
        let many = "abcdefghi.".repeat(26);
        assert_eq!(WireName::parse(&many, None), Err(NameError::NameTooLong));
        assert_eq!(n.to_string(), "A.");
        assert_eq!(
            WireName::parse("a\\.b.c.", None).unwrap().to_string(),
            "a\\.b.c."
        );
    }

    #[test]
    fn subdomain_is_label_aligned_and_case_insensitive() {
        let apex = WireName::parse("Example.COM.", None).unwrap();
        assert!(
            WireName::parse("www.example.com.", None)
                .unwrap()
                .is_subdomain_of(&apex)
        );
        assert!(apex.is_subdomain_of(&apex));
        assert!(
            !WireName::parse("wwwexample.com.", None)
                .unwrap()
                .is_subdomain_of(&apex)
        );
        assert!(apex.is_subdomain_of(&WireName::root()));
        assert_eq!(apex.parent().unwrap().as_bytes(), b"\x03COM\x00");
        assert_eq!(apex.label_count(), 2);
    }

    #[test]
    fn from_wire_rejects_bad_bytes() {
        assert!(WireName::from_wire(b"\x03www\x00").is_ok());
        assert_eq!(WireName::from_wire(b"\x03ww"), Err(NameError::BadWire));
        assert_eq!(WireName::from_wire(b"\xc0\x0c"), Err(NameError::BadWire));
        assert_eq!(WireName::from_wire(b"\x00\x00"), Err(NameError::BadWire));
    }
}
