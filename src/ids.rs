//! Lowercase hex (and the four hex digits of a `\uXXXX` escape read back), SHA-256 digests as
//! hex, and random identifiers (session ids, machine ids, demo homes).
//!
//! Owns: the one way Holdcall spells bytes as hex and draws random bytes. Must never: fall back
//! to a predictable source silently (callers decide what a missing random source means).

use std::fmt::Write as _;
use std::io::Read as _;

use sha2::{Digest, Sha256};

/// The four hex digits (either case, nothing else) at `pos`, as one UTF-16 unit.
pub(crate) fn hex4(bytes: &[u8], pos: usize) -> Option<u16> {
    let digits = bytes.get(pos..pos.checked_add(4)?)?;
    digits.iter().try_fold(0u16, |acc, &digit| {
        let value = char::from(digit).to_digit(16)?;
        Some(acc << 4 | u16::try_from(value).ok()?)
    })
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `n` bytes from the kernel's random source, as lowercase hex (2·n characters).
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_two_digits_a_byte() {
        assert_eq!(hex(&[0, 0x0f, 0xab, 0xff]), "000fabff");
    }

    #[test]
    fn random_hex_has_two_characters_a_byte_and_differs_between_calls() {
        let a = random_hex(16).unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, random_hex(16).unwrap());
    }
}
