//! What the evidence suites (the crash harness, the power-loss model, the fault matrix) share:
//! a random source a printed seed replays, and the digest by which they find a call in the
//! journal, computed here on their own.

/// xorshift64*: enough randomness to pick kill points, and replayable from a printed seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
}

/// The count in environment variable `name`, or `default` when it is not set.
pub(crate) fn count_from_env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|n| n.parse().unwrap_or_else(|_| panic!("{name} is a number")))
        .unwrap_or(default)
}

/// The seed in environment variable `name` (to replay a printed run), or a fresh odd one.
pub(crate) fn seed_from_env(name: &str) -> u64 {
    std::env::var(name)
        .ok()
        .map(|n| n.parse().unwrap_or_else(|_| panic!("{name} is a number")))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        })
}

/// SHA-256 in lower-case hex of a call's `arguments` bytes exactly as sent: what the relay
/// puts in `args_digest` (src/relay/classify.rs) and the journal stores, computed here on its
/// own so a relay that digested other bytes would be caught.
pub(crate) fn digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
