//! What the console has read of the journal, kept between requests: the projection grown entry by
//! entry, and the last check of the whole chain.

use crate::journal::{Entry, LogFilter, Reader, VerifyReport};
use crate::limits;
use crate::projection::Projection;

/// What the console has read of the journal, kept between requests: a projection of the newest
/// entries that grows by the entries appended since (each read once), and the last check of the
/// whole chain, run again at most once per `limits::CONSOLE_VERIFY_INTERVAL`.
#[derive(Default)]
pub(super) struct View {
    /// The chain_seq of the newest entry in `projection` (0: nothing read yet).
    pub(super) head: i64,
    pub(super) projection: Projection,
    /// The last chain check, with when it ran.
    pub(super) verified: Option<Verified>,
    /// Journal rows read for this view and for the pages it answered (a measure of the work).
    pub(super) rows_read: usize,
    /// How many times the whole chain was checked.
    pub(super) verify_runs: usize,
}

pub(super) struct Verified {
    pub(super) at: std::time::Instant,
    /// When it ran, RFC 3339 UTC.
    pub(super) at_text: String,
    pub(super) report: VerifyReport,
}

impl View {
    /// Reads the entries appended since the last call into the projection. The first call (or
    /// one after more than `CONSOLE_PROJECTION_ENTRIES_MAX` new entries, or once the projection
    /// holds twice that many) reads the newest `CONSOLE_PROJECTION_ENTRIES_MAX` afresh.
    pub(super) fn catch_up(&mut self, reader: &Reader) -> Result<(), crate::journal::JournalError> {
        let max = limits::CONSOLE_PROJECTION_ENTRIES_MAX;
        if self.head > 0 && self.projection.entries_read() < 2 * max {
            let mut added = 0;
            loop {
                let page = reader.entries_after(self.head, limits::CONSOLE_EVENTS_MAX)?;
                self.rows_read += page.len();
                for e in &page {
                    self.projection.add(e);
                    self.head = e.chain_seq;
                }
                added += page.len();
                if page.len() < limits::CONSOLE_EVENTS_MAX {
                    if added > 0 {
                        self.projection.settle();
                    }
                    return Ok(());
                }
                if added >= max {
                    break;
                }
            }
        }
        let entries = newest(reader)?;
        self.rows_read += entries.len();
        self.projection = Projection::build(&entries);
        self.head = entries.last().map_or(0, |e| e.chain_seq);
        Ok(())
    }

    /// The last chain check, run again when it is older than `CONSOLE_VERIFY_INTERVAL`.
    pub(super) fn verified(
        &mut self,
        reader: &Reader,
        machine_id: Option<&str>,
    ) -> Result<&Verified, crate::journal::JournalError> {
        let stale = self
            .verified
            .as_ref()
            .is_none_or(|v| v.at.elapsed() >= limits::CONSOLE_VERIFY_INTERVAL);
        if stale {
            let report = reader.verify(machine_id, None)?;
            self.verify_runs += 1;
            self.rows_read += usize::try_from(report.entries).unwrap_or(0);
            self.verified = Some(Verified {
                at: std::time::Instant::now(),
                at_text: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                report,
            });
        }
        self.verified
            .as_ref()
            .ok_or(crate::journal::JournalError::NoJournalYet {
                path: reader.path().to_path_buf(),
            })
    }
}

fn newest(reader: &Reader) -> Result<Vec<Entry>, crate::journal::JournalError> {
    reader.entries(&LogFilter {
        limit: Some(limits::CONSOLE_PROJECTION_ENTRIES_MAX),
        ..LogFilter::default()
    })
}
