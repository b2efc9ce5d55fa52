//! How a durable log syncs, how large its segments grow and what it retains.

use core::time::Duration;

use crate::StoreError;

/// When appended records are forced to the disk (`fdatasync`), and so what a crash can
/// take away.
///
/// | policy | process killed | machine loses power |
/// |---|---|---|
/// | `Always` | nothing that was acknowledged | nothing that was acknowledged |
/// | `Interval(d)` | nothing (the page cache survives) | up to `d` of acknowledged records |
/// | `Never` | nothing (the page cache survives) | whatever the OS had not written back |
///
/// Under every policy a record is written to the file (the OS page cache) before it is
/// acknowledged or visible to readers, so a crash of the process alone loses nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// A record is acknowledged once it is on the disk. Appenders waiting at the same
    /// time share one `fdatasync` (group commit), so many publishers together go faster
    /// than the disk's sync rate.
    Always,
    /// Records are synced at least this often (by a background thread), and acknowledged
    /// once written.
    Interval(Duration),
    /// Records are acknowledged once written; the OS syncs when it likes, and the log
    /// when it closes a segment (so that only the segment being written can be torn by
    /// a power loss).
    Never,
}

/// What a durable log keeps on disk. Only whole segments are deleted, oldest first, and
/// never the one being written; with no limit set the log keeps everything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// Keep at most about this many bytes of segments (the newest segment may go over).
    pub max_bytes: Option<u64>,
    /// Delete a segment once its newest record is older than this.
    pub max_age: Option<Duration>,
    /// Keep at most this many segment files.
    pub max_segments: Option<usize>,
}

/// A durable log's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurableConfig {
    /// When records reach the disk. Default: [`SyncPolicy::Always`].
    pub sync: SyncPolicy,
    /// A segment file is closed and a new one started once it holds this many bytes.
    /// Default: 64 MiB.
    pub segment_bytes: u64,
    /// What is kept on disk. Default: everything.
    pub retention: Retention,
    /// A sparse index entry is written every this many bytes of a segment. Default: 4 KiB.
    pub index_interval_bytes: u32,
    /// The largest record accepted, header included; also the largest length that
    /// recovery believes. Default: 64 MiB.
    pub max_record_bytes: u32,
    /// On open, check every record of every segment, not only the last segment's (which
    /// is always checked, as a crash can only tear the end). Default: off.
    pub verify_on_open: bool,
    /// On open, truncate the log at the last good record instead of failing with
    /// [`StoreError::Corrupt`], deleting later segments. What was thrown away is in the
    /// [`Recovery`](crate::Recovery) report. Default: off.
    pub repair: bool,
}

impl Default for DurableConfig {
    fn default() -> Self {
        DurableConfig {
            sync: SyncPolicy::Always,
            segment_bytes: 64 << 20,
            retention: Retention::default(),
            index_interval_bytes: 4096,
            max_record_bytes: 64 << 20,
            verify_on_open: false,
            repair: false,
        }
    }
}

impl DurableConfig {
    /// The defaults with sync policy `sync`.
    pub fn new(sync: SyncPolicy) -> Self {
        DurableConfig {
            sync,
            ..DurableConfig::default()
        }
    }

    /// Sets [`DurableConfig::segment_bytes`].
    #[must_use]
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }

    /// Sets [`DurableConfig::retention`].
    #[must_use]
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Sets [`DurableConfig::max_record_bytes`].
    #[must_use]
    pub fn max_record_bytes(mut self, bytes: u32) -> Self {
        self.max_record_bytes = bytes;
        self
    }

    /// Sets [`DurableConfig::verify_on_open`].
    #[must_use]
    pub fn verify_on_open(mut self, verify: bool) -> Self {
        self.verify_on_open = verify;
        self
    }

    /// Sets [`DurableConfig::repair`].
    #[must_use]
    pub fn repair(mut self, repair: bool) -> Self {
        self.repair = repair;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), StoreError> {
        if self.segment_bytes < 4096 {
            return Err(StoreError::InvalidConfig(
                "segment_bytes must be at least 4096",
            ));
        }
        if self.segment_bytes > u32::MAX as u64 {
            return Err(StoreError::InvalidConfig(
                "segment_bytes must fit the index's 32-bit positions (at most 4 GiB - 1)",
            ));
        }
        if self.index_interval_bytes == 0 {
            return Err(StoreError::InvalidConfig(
                "index_interval_bytes must not be 0",
            ));
        }
        if (self.max_record_bytes as usize) < crate::record::HEADER + crate::record::BODY_FIXED {
            return Err(StoreError::InvalidConfig(
                "max_record_bytes is smaller than an empty record",
            ));
        }
        if self.retention.max_segments == Some(0) {
            return Err(StoreError::InvalidConfig(
                "retention.max_segments must be at least 1 (the segment being written)",
            ));
        }
        if let SyncPolicy::Interval(d) = self.sync {
            if d.is_zero() {
                return Err(StoreError::InvalidConfig(
                    "SyncPolicy::Interval needs a non-zero interval (use Always)",
                ));
            }
        }
        Ok(())
    }
}
