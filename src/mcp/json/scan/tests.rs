//! The scanner's eight-byte fast path against the byte-at-a-time scan it replaced.

use super::*;

/// `scan_string` as it was before the eight-byte fast path: one byte at a time.
fn scan_string_bytewise(bytes: &[u8], start: usize) -> Result<usize, ScanError> {
    if bytes.get(start) != Some(&b'"') {
        return Err(ScanError::Malformed);
    }
    let mut pos = start + 1;
    loop {
        match bytes.get(pos).copied() {
            None => return Err(ScanError::Malformed),
            Some(b'"') => return Ok(pos + 1),
            Some(b'\\') => match bytes.get(pos + 1).copied() {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => pos += 2,
                Some(b'u') => {
                    hex4(bytes, pos + 2).ok_or(ScanError::Malformed)?;
                    pos += 6;
                }
                _ => return Err(ScanError::Malformed),
            },
            Some(0x00..=0x1f) => return Err(ScanError::Malformed),
            Some(0x20..=0x7f) => pos += 1,
            Some(_) => pos += utf8_width(bytes, pos).ok_or(ScanError::Malformed)?,
        }
    }
}

#[test]
fn the_fast_string_path_skips_exactly_the_bytes_the_bytewise_scan_accepts() {
    // Every byte value, at every offset of an eight-byte word and past the end of the
    // last whole word, inside a run of plain text: same verdict, same end.
    for len in 0..40 {
        for at in 0..len {
            for special in 0..=255u8 {
                let mut s = vec![b'"'];
                s.extend(std::iter::repeat_n(b'a', len));
                s[1 + at] = special;
                s.push(b'"');
                s.extend_from_slice(b"tail");
                assert_eq!(
                    scan_string(&s, 0),
                    scan_string_bytewise(&s, 0),
                    "byte {special:#04x} at {at} of {len}"
                );
            }
        }
    }
    // Unterminated runs end in an error, whatever their length.
    for len in 0..40 {
        let mut s = vec![b'"'];
        s.extend(std::iter::repeat_n(b'z', len));
        assert_eq!(scan_string(&s, 0), Err(ScanError::Malformed));
    }
    // Random bytes biased towards the interesting ones, as whole strings.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let alphabet: &[u8] =
        b"ab \\\"\\u00e9nt/\x00\x1f\x7f\x80\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xed\xa0\x80\xff";
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = (state % 48) as usize;
        let mut s = vec![b'"'];
        for k in 0..len {
            let pick = (state.rotate_left(k as u32 * 5) % alphabet.len() as u64) as usize;
            s.push(alphabet[pick]);
        }
        s.push(b'"');
        assert_eq!(scan_string(&s, 0), scan_string_bytewise(&s, 0), "{s:?}");
    }
}
