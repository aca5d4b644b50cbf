//! The secret-leak check: a connector's secret in each common encoding, as keyed fingerprints
//! that do not hold it, and the scanner that finds any of them in a line.
//!
//! The daemon reads the secret from the store at a session's start; `fingerprint` draws a fresh
//! random key for that session and turns each encoded form (`forms::Encoding`) into its length,
//! a 16-bit value of the rolling hash of its first `limits::LEAK_WINDOW_BYTES`, and its
//! HMAC-SHA256 under the key. The relay is handed those (`Fingerprints`, with the launch), and
//! the daemon keeps a `Matcher` of its own for the arguments of calls to other connectors.
//! `Matcher::find` rolls the window over each view of a line once (as sent, JSON-unescaped,
//! percent-decoded), and confirms each window whose hash value is a form's by the form's HMAC
//! over the bytes from there: only a whole form is a hit, never its first bytes alone.
//!
//! Owns: the encodings, the fingerprints, the scan. Must never: keep a plain secret or a plain
//! form past `fingerprint` (every buffer holding one is zeroed when dropped), print, log or
//! journal one, or do I/O (but for the random key).

mod forms;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

pub(crate) use forms::{Encoding, View};

use crate::limits;

/// Bytes of the per-session key.
const KEY_BYTES: usize = 32;

/// What the relay is handed to look for a session's secret: the session's key and one print
/// per encoded form. Its `Debug` shows how many forms, never the key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Fingerprints {
    /// The session's random key, hex.
    key: String,
    prints: Vec<Print>,
}

impl std::fmt::Debug for Fingerprints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Fingerprints({} forms, key <redacted>)",
            self.prints.len()
        )
    }
}

#[cfg(test)]
impl Fingerprints {
    /// Makes the key unreadable (not hex), as a corrupt launch would carry it.
    pub(crate) fn spoil_key_for_tests(&mut self) {
        self.key = "not hex".into();
    }
}

/// One encoded form, by what identifies it without spelling it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Print {
    encoding: Encoding,
    /// The form's length in bytes.
    len: usize,
    /// The low 16 bits of the rolling hash of the form's first `limits::LEAK_WINDOW_BYTES`:
    /// few enough bits that they say little about those bytes, enough that a random window
    /// matches one print in 65,536 (and is then confirmed by the HMAC).
    window: u16,
    /// HMAC-SHA256 of the whole form under the key, hex.
    digest: String,
}

/// Why no fingerprints were made.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub(crate) enum LeakError {
    #[error(
        "the secret is {0} bytes, under the leak check's minimum of {min}: answers are not checked for it",
        min = limits::LEAK_SECRET_BYTES_MIN
    )]
    #[diagnostic(
        code(holdcall::leak::too_short),
        help(
            "a secret this short turns up in ordinary text by chance and is cheap to guess; use a \
             longer token if the service allows it"
        )
    )]
    TooShort(usize),
    #[error("no random key for the leak check: {0}")]
    #[diagnostic(
        code(holdcall::leak::no_random),
        help("the kernel's random source (/dev/urandom) could not be read")
    )]
    NoRandom(std::io::Error),
}

/// The fingerprints of `secret` under a fresh random key.
pub(crate) fn fingerprint(secret: &[u8]) -> Result<Fingerprints, LeakError> {
    if secret.len() < limits::LEAK_SECRET_BYTES_MIN {
        return Err(LeakError::TooShort(secret.len()));
    }
    let key_hex = crate::ids::random_hex(KEY_BYTES).map_err(LeakError::NoRandom)?;
    let key = Zeroizing::new(parse_key(&key_hex).ok_or_else(|| {
        LeakError::NoRandom(std::io::Error::other("the key drawn is not 32 bytes"))
    })?);
    let table = table(&key);
    let mut prints: Vec<Print> = Vec::with_capacity(Encoding::ALL.len());
    for encoding in Encoding::ALL {
        let form = encoding.encode(secret);
        let Some(first) = form.get(..limits::LEAK_WINDOW_BYTES) else {
            continue;
        };
        let digest = crate::ids::hex(&hmac(&key, &form));
        // Two encodings can spell a secret alike (hex of digits only); one print is enough.
        if prints.iter().any(|p| p.digest == digest) {
            continue;
        }
        prints.push(Print {
            encoding,
            len: form.len(),
            window: low16(window_hash(&table, first)),
            digest,
        });
    }
    Ok(Fingerprints {
        key: key_hex,
        prints,
    })
}

/// A hit: which form was found, in which view of the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit {
    pub(crate) encoding: Encoding,
    pub(crate) view: View,
}

impl Hit {
    /// In words, for a person: "in base64, written with JSON escapes".
    pub(crate) fn describe(self) -> String {
        format!("{}{}", self.encoding.describe(), self.view.describe())
    }
}

/// The scanner for one set of fingerprints.
pub(crate) struct Matcher {
    key: Zeroizing<[u8; KEY_BYTES]>,
    table: Box<[u64; 256]>,
    /// Bit `v` is set when some print's window value is `v`.
    buckets: Box<[u64; 1024]>,
    prints: Vec<(u16, usize, [u8; 32], Encoding)>,
}

impl std::fmt::Debug for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Matcher({} forms)", self.prints.len())
    }
}

impl Matcher {
    /// The scanner for `f`; `None` when `f` is malformed (a key or digest that is not hex of
    /// the right length, a form shorter than the window).
    pub(crate) fn new(f: &Fingerprints) -> Option<Matcher> {
        let key = Zeroizing::new(parse_key(&f.key)?);
        let mut buckets = Box::new([0u64; 1024]);
        let mut prints = Vec::with_capacity(f.prints.len());
        for p in &f.prints {
            if p.len < limits::LEAK_WINDOW_BYTES {
                return None;
            }
            let digest = parse_key(&p.digest)?;
            let slot = buckets.get_mut(usize::from(p.window >> 6))?;
            *slot |= 1 << (p.window & 63);
            prints.push((p.window, p.len, digest, p.encoding));
        }
        Some(Matcher {
            table: Box::new(table(&key)),
            key,
            buckets,
            prints,
        })
    }

    /// The first form of the secret found in `line` (as sent, then in its decoded views).
    pub(crate) fn find(&self, line: &[u8]) -> Option<Hit> {
        if let Some(encoding) = self.scan(line) {
            return Some(Hit {
                encoding,
                view: View::AsSent,
            });
        }
        let mut hit = None;
        forms::decoded_views(line, |view, bytes| {
            hit = self.scan(bytes).map(|encoding| Hit { encoding, view });
            hit.is_some()
        });
        hit
    }

    /// One pass of the rolling window over `bytes`.
    fn scan(&self, bytes: &[u8]) -> Option<Encoding> {
        let w = limits::LEAK_WINDOW_BYTES;
        let first = bytes.get(..w)?;
        let mut h = window_hash(&self.table, first);
        if let Some(e) = self.confirm(bytes, 0, h) {
            return Some(e);
        }
        // `w` is below 64 (limits), so the rotation is exact.
        let out_rotation = u32::try_from(w).unwrap_or(0);
        for (p, (&out, &inn)) in bytes.iter().zip(bytes.iter().skip(w)).enumerate() {
            h = h.rotate_left(1) ^ self.entry(out).rotate_left(out_rotation) ^ self.entry(inn);
            if let Some(e) = self.confirm(bytes, p + 1, h) {
                return Some(e);
            }
        }
        None
    }

    fn entry(&self, b: u8) -> u64 {
        self.table.get(usize::from(b)).copied().unwrap_or(0)
    }

    /// The form starting at `at`, if the window's hash is one form's and the HMAC agrees.
    #[inline]
    fn confirm(&self, bytes: &[u8], at: usize, h: u64) -> Option<Encoding> {
        let v = low16(h);
        let bucket = self.buckets.get(usize::from(v >> 6)).copied().unwrap_or(0);
        if bucket & (1 << (v & 63)) == 0 {
            return None;
        }
        self.prints
            .iter()
            .filter(|(window, ..)| *window == v)
            .find(|(_, len, digest, _)| {
                bytes
                    .get(at..at.saturating_add(*len))
                    .is_some_and(|candidate| same(&hmac(&self.key, candidate), digest))
            })
            .map(|(.., e)| *e)
    }
}

fn low16(h: u64) -> u16 {
    u16::try_from(h & 0xffff).unwrap_or(0)
}

/// The rolling hash of one window: each byte's table entry rotated by its distance from the
/// window's end, all XORed (a cyclic polynomial, "buzhash"), so sliding by one byte costs two
/// lookups and three rotations.
fn window_hash(table: &[u64; 256], window: &[u8]) -> u64 {
    let w = window.len();
    window.iter().enumerate().fold(0u64, |h, (j, &b)| {
        let rotation = u32::try_from(w - 1 - j).unwrap_or(0);
        h ^ table
            .get(usize::from(b))
            .copied()
            .unwrap_or(0)
            .rotate_left(rotation)
    })
}

/// The rolling hash's table, derived from the key so that windows that collide are not known in
/// advance to anyone without it.
fn table(key: &[u8; KEY_BYTES]) -> [u64; 256] {
    let mut t = [0u64; 256];
    for (i, chunk) in t.chunks_mut(4).enumerate() {
        let d = Sha256::new()
            .chain_update(b"holdcall leak window table")
            .chain_update(key)
            .chain_update(u32::try_from(i).unwrap_or(0).to_be_bytes())
            .finalize();
        for (slot, bytes) in chunk.iter_mut().zip(d.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            *slot = u64::from_le_bytes(b);
        }
    }
    t
}

/// HMAC-SHA256 (RFC 2104) with a 32-byte key, from `sha2` alone.
fn hmac(key: &[u8; KEY_BYTES], message: &[u8]) -> [u8; 32] {
    let mut inner_pad = Zeroizing::new([0x36u8; 64]);
    let mut outer_pad = Zeroizing::new([0x5cu8; 64]);
    for ((i, o), k) in inner_pad.iter_mut().zip(outer_pad.iter_mut()).zip(key) {
        *i ^= k;
        *o ^= k;
    }
    let inner = Sha256::new()
        .chain_update(inner_pad.as_slice())
        .chain_update(message)
        .finalize();
    let outer = Sha256::new()
        .chain_update(outer_pad.as_slice())
        .chain_update(inner)
        .finalize();
    let mut out = [0u8; 32];
    out.copy_from_slice(&outer);
    out
}

/// Equal digests, compared without stopping at the first difference.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// 64 hex digits as 32 bytes.
fn parse_key(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let hi = char::from(*pair.first()?).to_digit(16)?;
        let lo = char::from(*pair.get(1)?).to_digit(16)?;
        *slot = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}
