//! Reading a log's lines from the end, for reopening and `tail` without reading it all.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// How much is read at a time.
const CHUNK: usize = 64 * 1024;

/// Lines of `file[..end]` from the last to the first. `end` must be 0 or just past a newline.
pub(crate) struct Backward<'f> {
    file: &'f File,
    /// File offset of `buf[0]`.
    start: u64,
    /// `file[start..]` up to the end of the lines not yet returned (ends with a newline).
    buf: Vec<u8>,
    /// Longest line accepted, newline included.
    max_line: usize,
}

impl<'f> Backward<'f> {
    pub(crate) fn new(file: &'f File, end: u64, max_line: usize) -> Backward<'f> {
        Backward {
            file,
            start: end,
            buf: Vec::new(),
            max_line,
        }
    }

    /// The previous line, without its newline, and its offset; `None` at the start.
    pub(crate) fn prev_line(&mut self) -> io::Result<Option<(u64, Vec<u8>)>> {
        loop {
            if self.buf.is_empty() && self.start == 0 {
                return Ok(None);
            }
            let body_end = self.buf.len().saturating_sub(1);
            if let Some(i) = self.buf[..body_end].iter().rposition(|&c| c == b'\n') {
                let line = self.buf[i + 1..body_end].to_vec();
                let offset = self.start + i as u64 + 1;
                self.buf.truncate(i + 1);
                return Ok(Some((offset, line)));
            }
            if self.start == 0 {
                let line = self.buf[..body_end].to_vec();
                self.buf.clear();
                return Ok(Some((0, line)));
            }
            if self.buf.len() > self.max_line {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a line ending at offset {} is longer than {} bytes",
                        self.start + self.buf.len() as u64,
                        self.max_line
                    ),
                ));
            }
            self.read_more()?;
        }
    }

    fn read_more(&mut self) -> io::Result<()> {
        let n = CHUNK.min(usize::try_from(self.start).unwrap_or(CHUNK));
        let at = self.start - n as u64;
        let mut chunk = vec![0; n];
        self.file.read_exact_at(&mut chunk, at)?;
        chunk.extend_from_slice(&self.buf);
        self.buf = chunk;
        self.start = at;
        Ok(())
    }
}

/// The offset just past the last newline in `file[..end]`: where a partial last line starts
/// (0 when there is no newline).
pub(crate) fn end_of_last_line(file: &File, end: u64) -> io::Result<u64> {
    let mut pos = end;
    let mut chunk = vec![0; CHUNK];
    while pos > 0 {
        let n = CHUNK.min(usize::try_from(pos).unwrap_or(CHUNK));
        let at = pos - n as u64;
        file.read_exact_at(&mut chunk[..n], at)?;
        if let Some(i) = chunk[..n].iter().rposition(|&c| c == b'\n') {
            return Ok(at + i as u64 + 1);
        }
        pos = at;
    }
    Ok(0)
}

/// The byte at `offset`.
pub(crate) fn byte_at(file: &File, offset: u64) -> io::Result<u8> {
    let mut b = [0];
    file.read_exact_at(&mut b, offset)?;
    Ok(b[0])
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file_with(content: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(content).unwrap();
        f
    }

    fn all_backwards(f: &File, end: u64, max: usize) -> io::Result<Vec<(u64, Vec<u8>)>> {
        let mut b = Backward::new(f, end, max);
        let mut out = Vec::new();
        while let Some(l) = b.prev_line()? {
            out.push(l);
        }
        Ok(out)
    }

    #[test]
    fn backward_returns_lines_and_offsets_across_chunks() {
        let mut content = Vec::new();
        let mut want = Vec::new();
        for i in 0..3000usize {
            let line = format!("{i}:{}", "x".repeat(i % 97));
            want.push((content.len() as u64, line.clone().into_bytes()));
            content.extend_from_slice(line.as_bytes());
            content.push(b'\n');
        }
        content.extend_from_slice(b"\n"); // an empty last line
        want.push((content.len() as u64 - 1, Vec::new()));
        let f = file_with(&content);
        want.reverse();
        assert!(content.len() > 2 * CHUNK);
        assert_eq!(all_backwards(&f, content.len() as u64, 1000).unwrap(), want);
        assert!(all_backwards(&f, 0, 1000).unwrap().is_empty());
    }

    #[test]
    fn backward_refuses_overlong_lines() {
        let mut content = vec![b'a'; CHUNK + 10];
        content.push(b'\n');
        let f = file_with(&content);
        assert!(all_backwards(&f, content.len() as u64, 100).is_err());
        assert_eq!(
            all_backwards(&f, content.len() as u64, 2 * CHUNK).unwrap(),
            vec![(0, vec![b'a'; CHUNK + 10])]
        );
    }

    #[test]
    fn end_of_last_line_finds_the_partial_line() {
        let mut content = vec![b'a'; CHUNK * 2];
        content[5] = b'\n';
        let f = file_with(&content);
        assert_eq!(end_of_last_line(&f, content.len() as u64).unwrap(), 6);
        assert_eq!(end_of_last_line(&f, 5).unwrap(), 0);
        assert_eq!(end_of_last_line(&f, 6).unwrap(), 6);
        assert_eq!(byte_at(&f, 5).unwrap(), b'\n');
    }
}
