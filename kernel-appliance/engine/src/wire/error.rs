//! The error of the message reader ([`super::record`], [`super::names`], [`super::rdata`]).

use core::fmt;

/// Why bytes could not be read as a message part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The message ends inside a field.
    Truncated,
    /// A name with a bad label type, a label over 63 octets, a pointer that does not
    /// point backwards or a chain of too many, or a name over 255 octets.
    BadName,
    /// RDATA that does not match its type's layout.
    BadRdata,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Truncated => "message truncated",
            Self::BadName => "malformed domain name",
            Self::BadRdata => "malformed record data",
        })
    }
}

impl core::error::Error for ReadError {}
