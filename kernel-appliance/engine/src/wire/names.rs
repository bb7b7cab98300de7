//! The one decompressor of domain names in DNS messages (RFC 1035 §4.1.4).
//!
//! Every byte comes from the network and may be hostile: [`read_name`] returns an error for
//! anything it cannot read completely and never panics. Its work is bounded three ways:
//! a pointer must point strictly before the run of labels that holds it (RFC 1035 §4.1.4
//! allows only prior occurrences), so positions decrease at every jump and no loop can
//! form; a name is at most 255 octets decompressed (labels at most 63, RFC 1035 §2.3.4);
//! and at most [`MAX_POINTER_HOPS`] pointers are followed for one name.

use alloc::vec::Vec;

use super::error::ReadError;
use crate::name::{MAX_LABEL_LEN, MAX_NAME_LEN};

/// Most compression pointers followed for one name (Unbound's `MAX_COMPRESS_PTRS`). A
/// name has at most 127 labels; a chain of more pointers than that is built to make the
/// reader work, and backward-only pointers alone would let it run to 8,000 hops in a
/// 16 KiB message.
pub const MAX_POINTER_HOPS: usize = 256;

/// Reads the possibly compressed name at `pos`; returns it uncompressed (case as received,
/// root label included) and the offset just after its in-place part (after the first
/// pointer, if any).
pub fn read_name(msg: &[u8], pos: usize) -> Result<(Vec<u8>, usize), ReadError> {
    let mut out = Vec::with_capacity(32);
    let mut at = pos;
    let mut next = None;
    // Every pointer must point strictly before the start of the current run of labels.
    let mut limit = pos;
    let mut hops = 0usize;
    loop {
        let len = *msg.get(at).ok_or(ReadError::Truncated)?;
        match len {
            0 => {
                out.push(0);
                if out.len() > MAX_NAME_LEN {
                    return Err(ReadError::BadName);
                }
                return Ok((out, next.unwrap_or(at + 1)));
            }
            l if usize::from(l) <= MAX_LABEL_LEN => {
                let l = usize::from(l);
                let label = msg.get(at..at + 1 + l).ok_or(ReadError::Truncated)?;
                out.extend_from_slice(label);
                // The root label still has to come: a name this long is over 255 octets.
                if out.len() >= MAX_NAME_LEN {
                    return Err(ReadError::BadName);
                }
                at += 1 + l;
            }
            l if l & 0xc0 == 0xc0 => {
                let lo = *msg.get(at + 1).ok_or(ReadError::Truncated)?;
                let target = (usize::from(l & 0x3f) << 8) | usize::from(lo);
                if next.is_none() {
                    next = Some(at + 2);
                }
                hops += 1;
                if target >= limit.min(at) || hops > MAX_POINTER_HOPS {
                    return Err(ReadError::BadName);
                }
                limit = target;
                at = target;
            }
            // 0x40 and 0x80: extended and reserved label types (RFC 6891 §5 retired them).
            _ => return Err(ReadError::BadName),
        }
    }
}

/// Offset just past a (possibly compressed) name at `at`, without reading it: for walking
/// a message whose names are not needed. `None` when it is malformed or cut.
pub(crate) fn skip_name(m: &[u8], mut at: usize) -> Option<usize> {
    for _ in 0..128 {
        let b = *m.get(at)?;
        match b & 0xc0 {
            0x00 if b == 0 => return Some(at + 1),
            0x00 => at += 1 + usize::from(b),
            // A pointer ends the name (RFC 1035 §4.1.4).
            0xc0 => return m.get(at + 1).map(|_| at + 2),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn follows_backward_pointers() {
        let mut m = vec![0u8; 12];
        m.extend_from_slice(b"\x07example\x00");
        m.extend_from_slice(b"\x03www\xc0\x0c");
        assert_eq!(
            read_name(&m, 21).unwrap(),
            (b"\x03www\x07example\x00".to_vec(), 27)
        );
        assert_eq!(skip_name(&m, 21), Some(27));
    }

    #[test]
    fn hostile_names_are_errors() {
        // Pointer to itself, pointer forwards, pointer past the end.
        let mut m = vec![0u8; 12];
        m.extend_from_slice(&[0xc0, 12]);
        assert_eq!(read_name(&m, 12), Err(ReadError::BadName));
        let mut m = vec![0u8; 12];
        m.extend_from_slice(&[0xc0, 14, 0]);
        assert_eq!(read_name(&m, 12), Err(ReadError::BadName));
        let mut m = vec![0u8; 12];
        m.extend_from_slice(&[0x01, b'a', 0xff, 0xff]);
        assert_eq!(read_name(&m, 12), Err(ReadError::BadName));
        // A loop of two pointers: the second one points at the first.
        let mut m = vec![0u8; 12];
        m.extend_from_slice(&[0xc0, 14, 0xc0, 12]);
        assert_eq!(read_name(&m, 14), Err(ReadError::BadName));
        // A label whose length octet says 64 (0x40: an extended label type, RFC 6891 §5),
        // and 0x80.
        let mut m = vec![0u8; 12];
        m.push(64);
        m.extend_from_slice(&[b'a'; 64]);
        m.push(0);
        assert_eq!(read_name(&m, 12), Err(ReadError::BadName));
        assert_eq!(read_name(&[0x80, 0], 0), Err(ReadError::BadName));
        // Cut inside a label and inside a pointer.
        assert_eq!(read_name(&[3, b'a'], 0), Err(ReadError::Truncated));
        assert_eq!(read_name(&[1, b'a', 0xc0], 0), Err(ReadError::Truncated));
        assert_eq!(read_name(&[], 0), Err(ReadError::Truncated));
        assert_eq!(skip_name(&[0x40, 0], 0), None);
        assert_eq!(skip_name(&[0xc0], 0), None);
    }

    #[test]
    fn names_over_255_octets_are_errors() {
        // In place: three 63-octet labels (192 octets), a 61-octet one and the root make
        // 255 octets; a 62-octet one 256.
        let mut m = Vec::new();
        for _ in 0..3 {
            m.push(63);
            m.extend_from_slice(&[b'a'; 63]);
        }
        let ok = [m.clone(), vec![61], vec![b'b'; 61], vec![0]].concat();
        assert_eq!(read_name(&ok, 0).unwrap().0.len(), 255);
        let long = [m, vec![62], vec![b'b'; 62], vec![0]].concat();
        assert_eq!(read_name(&long, 0), Err(ReadError::BadName));
        // Through pointers: each 63-octet label points at the previous one.
        let mut m = vec![0u8; 12];
        let mut prev: Option<u16> = None;
        for _ in 0..5 {
            let at = m.len();
            m.push(63);
            m.extend_from_slice(&[b'a'; 63]);
            match prev {
                Some(p) => m.extend_from_slice(&(0xc000u16 | p).to_be_bytes()),
                None => m.push(0),
            }
            prev = Some(at as u16);
        }
        assert_eq!(
            read_name(&m, usize::from(prev.unwrap())),
            Err(ReadError::BadName)
        );
    }

    #[test]
    fn pointer_chains_are_bounded() {
        // The root at 12, then pointers each to the one before: every jump is backwards,
        // the name stays one octet long, only the hop count stops the walk.
        let mut m = vec![0u8; 12];
        m.push(0);
        let mut prev = 12u16;
        for _ in 0..MAX_POINTER_HOPS + 1 {
            let at = m.len() as u16;
            m.extend_from_slice(&(0xc000u16 | prev).to_be_bytes());
            prev = at;
        }
        let last = usize::from(prev);
        assert_eq!(read_name(&m, last), Err(ReadError::BadName));
        // One hop fewer is read.
        let shorter = last - 2;
        assert_eq!(read_name(&m, shorter).unwrap(), (vec![0], shorter + 2));
    }
}
