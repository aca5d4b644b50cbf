//! The capped line reader: one newline-delimited line at a time, never buffering more than a
//! named limit of it, whatever the peer sends.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What one bounded read produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// A line, with its newline when it had one (the last line of a stream may not).
    Line(Vec<u8>),
    /// A line longer than the cap, read and discarded through its newline; its length.
    TooLong(usize),
    /// End of stream.
    Eof,
}

/// Reads one line of at most `max` bytes (newline included) without ever buffering more than
/// `max` bytes of it: the rest of an overlong line is consumed and dropped.
pub(crate) async fn read_line_capped<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> std::io::Result<LineRead> {
    let mut line = Vec::new();
    let mut total = 0usize;
    let mut overflow = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if overflow {
                LineRead::TooLong(total)
            } else if line.is_empty() {
                LineRead::Eof
            } else {
                LineRead::Line(line)
            });
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (buf.get(..=i).unwrap_or(buf), true),
            None => (buf, false),
        };
        let n = chunk.len();
        total = total.saturating_add(n);
        if !overflow {
            if total > max {
                overflow = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        r.consume(n);
        if done {
            return Ok(if overflow {
                LineRead::TooLong(total)
            } else {
                LineRead::Line(line)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn read(input: &[u8], max: usize) -> Vec<LineRead> {
        let mut r = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            let l = read_line_capped(&mut r, max).await.unwrap();
            let end = l == LineRead::Eof;
            out.push(l);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_returned_with_their_newline_and_a_last_line_without_one() {
        let got = read(b"ab\ncd", 10).await;
        assert_eq!(
            got,
            vec![
                LineRead::Line(b"ab\n".to_vec()),
                LineRead::Line(b"cd".to_vec()),
                LineRead::Eof
            ]
        );
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_cap_is_read_and_one_byte_over_is_dropped_whole() {
        let got = read(b"12345\n123456\nok\n", 6).await;
        assert_eq!(
            got,
            vec![
                LineRead::Line(b"12345\n".to_vec()),
                LineRead::TooLong(7),
                LineRead::Line(b"ok\n".to_vec()),
                LineRead::Eof
            ]
        );
    }
}
