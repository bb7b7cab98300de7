//! Reading the questions and records of a whole DNS message (RFC 1035 §4.1.2, §4.1.3):
//! the one reader under the resolver's upstream replies (`skua_resolver::msg`) and the
//! zone transfers' messages (`skua_xfr::wire`).
//!
//! Names are decompressed by [`super::names::read_name`], RDATA by
//! [`super::rdata::read_rdata`] after the layout table. Nothing here decides what a record
//! means or whether a message is acceptable (counts, OPT, TSIG): the callers do.

use alloc::vec::Vec;

pub use super::error::ReadError;
use super::names::read_name;
use super::rdata::read_rdata;

/// A question entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// Name, uncompressed, case as received.
    pub name: Vec<u8>,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
    /// Offset just after the entry.
    pub end: usize,
}

/// Reads the question entry at `pos`.
pub fn read_question(msg: &[u8], pos: usize) -> Result<Question, ReadError> {
    let (name, next) = read_name(msg, pos)?;
    let f = msg.get(next..next + 4).ok_or(ReadError::Truncated)?;
    Ok(Question {
        name,
        qtype: u16::from_be_bytes([f[0], f[1]]),
        qclass: u16::from_be_bytes([f[2], f[3]]),
        end: next + 4,
    })
}

/// A record as it sits in a message, its RDATA not read yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordView {
    /// Offset of its first octet (the owner name).
    pub start: usize,
    /// Owner, uncompressed, case as received.
    pub owner: Vec<u8>,
    /// TYPE.
    pub rtype: u16,
    /// CLASS.
    pub class: u16,
    /// The TTL field as sent (an OPT record keeps its flags there).
    pub ttl: u32,
    /// Offset of the RDATA.
    pub rdata: usize,
    /// RDLENGTH; the RDATA lies within the message.
    pub rdlen: usize,
}

impl RecordView {
    /// Offset just after the record.
    pub fn end(&self) -> usize {
        self.rdata + self.rdlen
    }

    /// The RDATA with its names decompressed (see [`read_rdata`]).
    pub fn read_rdata(&self, msg: &[u8]) -> Result<Vec<u8>, ReadError> {
        read_rdata(msg, self.rtype, self.rdata, self.end())
    }
}

/// Reads the owner and fixed fields of the record at `pos`, and checks that its RDATA lies
/// within the message.
pub fn read_record_view(msg: &[u8], pos: usize) -> Result<RecordView, ReadError> {
    let (owner, next) = read_name(msg, pos)?;
    let f = msg.get(next..next + 10).ok_or(ReadError::Truncated)?;
    let rdata = next + 10;
    let rdlen = usize::from(u16::from_be_bytes([f[8], f[9]]));
    if rdata + rdlen > msg.len() {
        return Err(ReadError::Truncated);
    }
    Ok(RecordView {
        start: pos,
        owner,
        rtype: u16::from_be_bytes([f[0], f[1]]),
        class: u16::from_be_bytes([f[2], f[3]]),
        ttl: u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
        rdata,
        rdlen,
    })
}

/// Reads the record at `pos`: its view and its RDATA, names decompressed.
pub fn read_record(msg: &[u8], pos: usize) -> Result<(RecordView, Vec<u8>), ReadError> {
    let v = read_record_view(msg, pos)?;
    let rdata = v.read_rdata(msg)?;
    Ok((v, rdata))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn reads_question_and_compressed_record() {
        let mut m = vec![0u8; 12];
        m.extend_from_slice(b"\x03www\x07example\x00\x00\x05\x00\x01");
        m.extend_from_slice(b"\xc0\x0c\x00\x05\x00\x01\x80\x00\x01\x00\x00\x07\x04host\xc0\x10");
        let q = read_question(&m, 12).unwrap();
        assert_eq!(
            (q.name.as_slice(), q.qtype, q.qclass, q.end),
            (&b"\x03www\x07example\x00"[..], 5, 1, 29)
        );
        let (v, rd) = read_record(&m, q.end).unwrap();
        assert_eq!(v.owner, b"\x03www\x07example\x00");
        assert_eq!((v.rtype, v.class, v.ttl, v.rdlen), (5, 1, 0x8000_0100, 7));
        assert_eq!(v.end(), m.len());
        assert_eq!(rd, b"\x04host\x07example\x00");
    }

    #[test]
    fn cut_records_are_truncated() {
        let mut m = vec![0u8; 12];
        m.extend_from_slice(b"\x00\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x01\x02");
        assert_eq!(read_record_view(&m, 12), Err(ReadError::Truncated));
        assert_eq!(read_record_view(&m[..20], 12), Err(ReadError::Truncated));
        assert_eq!(read_question(&m[..14], 12), Err(ReadError::Truncated));
        assert_eq!(read_record(&m, 99), Err(ReadError::Truncated));
    }
}
