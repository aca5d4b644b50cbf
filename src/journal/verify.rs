//! [`Reader::verify`]: the whole chain walked in order, every problem named (gaps, broken links,
//! altered entries, an expected head gone), and the tables checked against the journal.

use super::JournalError;
use super::encoding::{Entry, SCHEMA_VERSION, encode, entry_hash, genesis, is_hash};
use super::reader::Reader;
use super::row::{ENTRY_COLUMNS, HASH_COLUMN, col_text, entry_from_row};
use crate::limits::{VERIFY_BATCH, VERIFY_BATCHES_IN_FLIGHT};

/// Hashes in messages are shortened to this many hex characters: enough to tell them apart by eye.
const SHORT_HASH_CHARS: usize = 12;

fn short(hash: &str) -> &str {
    hash.get(..SHORT_HASH_CHARS).unwrap_or(hash)
}

/// The overall verdict of [`Reader::verify`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ChainState {
    /// No entries, no problems.
    Empty,
    /// Every entry checked, starting from the genesis of the given machine id.
    Intact,
    /// No machine id: entry 1's prev_hash taken as given; everything after it checked.
    Partial,
    /// At least one problem.
    Broken,
}

/// One thing wrong with the journal. `chain_seq` is 0 when no entry can be named.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Problem {
    pub chain_seq: i64,
    pub message: String,
}

#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct VerifyReport {
    pub state: ChainState,
    pub entries: i64,
    /// The stored hash of the last entry.
    pub head: Option<String>,
    pub problems: Vec<Problem>,
    /// One sentence about `--expect-head`, when it was given.
    pub expect_head: Option<String>,
    /// Every way the policies, budgets and agents tables differ from what the journal's
    /// `policy.change`, `budget.change` and `agent.change` entries put in force (see
    /// [`Reader::table_mismatches`]); any makes the state [`ChainState::Broken`].
    pub tables: Vec<String>,
}

fn plural(n: i64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn gap_problem(expected: i64, found: i64) -> Problem {
    let message = if found < expected {
        // Only possible for the first row: chain_seq is unique and rows come in order.
        format!("entry {found} is out of place: the chain starts at entry 1")
    } else if expected == 1 {
        let missing = if found == 2 {
            "entry 1 is missing".to_owned()
        } else {
            format!("entries 1 to {} are missing", found - 1)
        };
        format!("{missing}: the journal starts at entry {found} — entries were removed")
    } else {
        let missing = if found - expected == 1 {
            format!("entry {expected} is missing")
        } else {
            format!("entries {expected} to {} are missing", found - 1)
        };
        format!(
            "{missing}: the entry after {} is {found} — entries were removed",
            expected - 1
        )
    };
    Problem {
        chain_seq: expected.min(found),
        message,
    }
}

impl Reader {
    /// Walks the whole chain in chain_seq order and names every problem it finds (see
    /// docs/journal-format.md, "Verification"). Without `machine_id`, entry 1's prev_hash is taken
    /// as given ([`ChainState::Partial`]). `expect_head` is a head recorded earlier: the chain must
    /// still contain it.
    pub(crate) fn verify(
        &self,
        machine_id: Option<&str>,
        expect_head: Option<&str>,
    ) -> Result<VerifyReport, JournalError> {
        let expect = parse_expect_head(expect_head)?;

        // Each problem with the position of its row in the walk.
        let mut problems: Vec<(i64, Problem)> = Vec::new();
        // What the next entry's prev_hash must be; None = unknown (no machine id, or after a gap
        // or an unreadable row), so the next link is taken as given.
        let mut prev: Option<String> = machine_id.map(genesis);
        let mut expected_seq: i64 = 1;
        let mut entries: i64 = 0;
        let mut last_seq: i64 = 0;
        let mut head: Option<String> = None;
        // (chain_seq, position among rows) of the entry whose hash is the expected head.
        let mut expect_at: Option<(i64, i64)> = None;

        // Hashing is most of the work and needs nothing but the entry, so it runs on other
        // threads, batch by batch, while this one reads the rows and checks the order and the
        // links (which need the entry before). Each problem keeps its row's position, so the
        // report reads as one walk in chain order would.
        let mut hashed: Vec<(i64, Problem)> = Vec::new();
        let (to_hash, batches) =
            std::sync::mpsc::sync_channel::<Vec<(i64, Entry)>>(VERIFY_BATCHES_IN_FLIGHT);
        let batches = std::sync::Mutex::new(batches);
        let walked = std::thread::scope(|scope| -> Result<(), JournalError> {
            let hashers: Vec<_> = (0..hashing_threads())
                .map(|_| scope.spawn(|| hash_batches(&batches)))
                .collect();
            let mut batch = Vec::with_capacity(VERIFY_BATCH);
            let send = |batch: Vec<(i64, Entry)>| {
                // Every hasher gone means these entries would go unchecked: a refusal to
                // judge, never a pass.
                to_hash
                    .send(batch)
                    .map_err(|_| JournalError::VerifyIncomplete {
                        path: self.path.clone(),
                    })
            };

            // One statement, so the walk sees one snapshot even while the daemon appends.
            let mut stmt = self
                .conn
                .prepare(&format!(
                    "SELECT {ENTRY_COLUMNS} FROM journal ORDER BY chain_seq"
                ))
                .map_err(self.read_err())?;
            let mut rows = stmt.query([]).map_err(self.read_err())?;
            while let Some(row) = rows.next().map_err(self.read_err())? {
                let chain_seq: i64 = row.get(0).map_err(self.read_err())?;
                entries += 1;
                if chain_seq != expected_seq {
                    problems.push((entries, gap_problem(expected_seq, chain_seq)));
                    // The entry before this one is gone, so what it should link to is unknown;
                    // the gap is the finding, a link complaint would only repeat it.
                    prev = None;
                }
                expected_seq = chain_seq.saturating_add(1);
                let stored_hash = col_text(row, HASH_COLUMN, "hash").ok().flatten();

                match entry_from_row(row) {
                    Err(what) => problems.push((
                        entries,
                        Problem {
                            chain_seq,
                            message: format!("entry {chain_seq} cannot be checked: {what}"),
                        },
                    )),
                    Ok(e) => {
                        for p in check_link(&e, prev.as_deref()) {
                            problems.push((entries, p));
                        }
                        if e.schema_version == SCHEMA_VERSION {
                            batch.push((entries, e));
                            if batch.len() == VERIFY_BATCH {
                                send(std::mem::replace(
                                    &mut batch,
                                    Vec::with_capacity(VERIFY_BATCH),
                                ))?;
                            }
                        }
                    }
                }

                if let (Some(x), Some(h)) = (&expect, &stored_hash)
                    && x == h
                {
                    expect_at = Some((chain_seq, entries));
                }
                // Judge the next entry against what is stored here, so one bad entry is
                // reported once and the ones after it are judged on their own.
                prev.clone_from(&stored_hash);
                head = stored_hash;
                last_seq = chain_seq;
            }
            if !batch.is_empty() {
                send(batch)?;
            }
            drop(to_hash);
            for h in hashers {
                match h.join() {
                    Ok(found) => hashed.extend(found),
                    Err(_) => {
                        return Err(JournalError::VerifyIncomplete {
                            path: self.path.clone(),
                        });
                    }
                }
            }
            Ok(())
        });
        walked?;
        // Within a row: the order and link problems first, then the hash (stable sort).
        problems.extend(hashed);
        problems.sort_by_key(|(position, _)| *position);
        let mut problems: Vec<Problem> = problems.into_iter().map(|(_, p)| p).collect();

        let expect_verdict =
            expect.map(|x| expect_verdict(&x, expect_at, entries, last_seq, &mut problems));

        let tables = self.table_mismatches()?;
        let state = if !problems.is_empty() || !tables.is_empty() {
            ChainState::Broken
        } else if entries == 0 {
            ChainState::Empty
        } else if machine_id.is_none() {
            ChainState::Partial
        } else {
            ChainState::Intact
        };
        Ok(VerifyReport {
            state,
            entries,
            head,
            problems,
            expect_head: expect_verdict,
            tables,
        })
    }
}

/// The `--expect-head` argument, trimmed and lowercased; `None` if none was given. Anything but 64
/// hex characters is an error, not a verdict.
fn parse_expect_head(expect_head: Option<&str>) -> Result<Option<String>, JournalError> {
    match expect_head.map(str::trim) {
        None => Ok(None),
        Some(h) if is_hash(&h.to_ascii_lowercase()) => Ok(Some(h.to_ascii_lowercase())),
        Some(h) => Err(JournalError::BadExpectHead {
            given: h.to_owned(),
        }),
    }
}

/// How many threads hash entries while the walk reads them: every core but the reader's, at
/// least one.
fn hashing_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .max(1)
}

/// One hashing thread: takes batches until the walk is done, answers the hash problems found
/// with their rows' positions.
fn hash_batches(
    batches: &std::sync::Mutex<std::sync::mpsc::Receiver<Vec<(i64, Entry)>>>,
) -> Vec<(i64, Problem)> {
    let mut found = Vec::new();
    loop {
        let next = match batches.lock() {
            Ok(rx) => rx.recv(),
            // Another hasher cannot panic holding the lock (nothing in here panics); if it
            // ever did, stop taking batches: the walk then fails to send and refuses.
            Err(_) => return found,
        };
        let Ok(batch) = next else {
            return found;
        };
        for (position, e) in &batch {
            if let Some(p) = check_hash(e) {
                found.push((*position, p));
            }
        }
    }
}

/// Checks one decoded entry's schema version and its link to `prev` (what the entry before it
/// stores, or the genesis; `None` = unknown, so the link is taken as given).
fn check_link(e: &Entry, prev: Option<&str>) -> Vec<Problem> {
    let chain_seq = e.chain_seq;
    let mut problems = Vec::new();
    if e.schema_version != SCHEMA_VERSION {
        problems.push(Problem {
            chain_seq,
            message: format!(
                "entry {chain_seq} was written under schema_version {}, which this build does not know how to verify",
                e.schema_version
            ),
        });
    }
    // The link is format-independent, so it is checked whatever the schema.
    if let Some(p) = prev
        && e.prev_hash != p
    {
        let message = if chain_seq == 1 {
            format!(
                "entry 1 does not link to the genesis of this machine id: its prev_hash is {} but the genesis is {} (wrong machine id, or entry 1 was replaced)",
                short(&e.prev_hash),
                short(p)
            )
        } else {
            format!(
                "entry {chain_seq} does not link to the entry before it: its prev_hash is {} but entry {} stores {}",
                short(&e.prev_hash),
                chain_seq - 1,
                short(p)
            )
        };
        problems.push(Problem { chain_seq, message });
    }
    problems
}

/// Checks that an entry of the known schema hashes to what it stores.
fn check_hash(e: &Entry) -> Option<Problem> {
    let chain_seq = e.chain_seq;
    match entry_hash(&e.prev_hash, &encode(e)) {
        None => Some(Problem {
            chain_seq,
            message: format!(
                "entry {chain_seq} has been altered: its prev_hash is not 64 lowercase hex characters"
            ),
        }),
        Some(h) if h != e.hash => Some(Problem {
            chain_seq,
            message: format!(
                "entry {chain_seq} has been altered: its contents hash to {} but it stores {}",
                short(&h),
                short(&e.hash)
            ),
        }),
        Some(_) => None,
    }
}

/// The sentence about `--expect-head`: where the recorded head `x` is in the chain. An empty
/// journal, or a head that is nowhere in it, is also a problem.
fn expect_verdict(
    x: &str,
    expect_at: Option<(i64, i64)>,
    entries: i64,
    last_seq: i64,
    problems: &mut Vec<Problem>,
) -> String {
    match expect_at {
        _ if entries == 0 => {
            let s = format!(
                "the journal is empty, so it cannot end at {}, the head you recorded",
                short(x)
            );
            problems.push(Problem {
                chain_seq: 0,
                message: s.clone(),
            });
            s
        }
        Some((_, pos)) if pos == entries => {
            "the journal still ends at the head you recorded".to_owned()
        }
        Some((seq, pos)) => format!(
            "the head you recorded is entry {seq}; the journal has grown by {} since, so record the new head to cover them too",
            plural(entries - pos, "entry", "entries")
        ),
        None => {
            let s = format!(
                "the head you recorded ({}) is nowhere in the chain: entries were removed or the chain was recomputed",
                short(x)
            );
            problems.push(Problem {
                chain_seq: last_seq,
                message: s.clone(),
            });
            s
        }
    }
}
