//! The store's errors: every one names what it was doing and where.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// What went wrong in the durable log.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O call failed: `op` says which (`"write"`, `"fsync"`, `"open"`, ...) and
    /// `path` on what. Disk full is this, with the OS error `ENOSPC` in `source` (see
    /// [`StoreError::is_disk_full`]).
    Io {
        /// What the store was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Another [`SegmentLog`](crate::SegmentLog) holds this directory: in another process,
    /// or in this one. One log owns a directory at a time.
    Locked {
        /// The directory.
        dir: PathBuf,
    },
    /// A record in the middle of the log failed its check, with sound records after it:
    /// not the torn tail a crash leaves, which opening truncates by itself. Nothing was
    /// changed on disk. [`DurableConfig::repair`](crate::DurableConfig::repair) truncates
    /// the log at the last good record, throwing away everything from `position` on.
    Corrupt {
        /// The segment file.
        file: PathBuf,
        /// The byte position of the bad record in that file.
        position: u64,
        /// The offset the record should have had.
        offset: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A file in the directory is not what the store wrote (a foreign or damaged header,
    /// a gap between segments).
    Format {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A record larger than [`DurableConfig::max_record_bytes`](crate::DurableConfig::max_record_bytes).
    TooLarge {
        /// Its size on disk.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The log is at its retention limit and the oldest segment is still needed by a
    /// reader (under `Overflow::Block`): nothing is deleted until readers move on.
    Full,
    /// A configuration value that cannot work.
    InvalidConfig(&'static str),
    /// An ack of a durable group's delivery whose lease ran out and whose message was
    /// delivered again since (or dead-lettered, or deleted by retention): the ack settled
    /// nothing.
    LeaseExpired,
}

impl StoreError {
    /// Whether this is the disk (or the user's quota) running out of space.
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => {
                matches!(source.raw_os_error(), Some(e) if e == ENOSPC || e == EDQUOT)
                    || source.kind() == io::ErrorKind::StorageFull
            }
            _ => false,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        StoreError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The same error again, for each publish of a group write that one failure ended
    /// (`io::Error` is not `Clone`: its OS code, or its kind and text, are copied).
    pub(crate) fn duplicate(&self) -> StoreError {
        match self {
            StoreError::Io { op, path, source } => StoreError::Io {
                op,
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
            StoreError::Locked { dir } => StoreError::Locked { dir: dir.clone() },
            StoreError::Corrupt {
                file,
                position,
                offset,
                reason,
            } => StoreError::Corrupt {
                file: file.clone(),
                position: *position,
                offset: *offset,
                reason,
            },
            StoreError::Format { file, reason } => StoreError::Format {
                file: file.clone(),
                reason: reason.clone(),
            },
            StoreError::TooLarge { size, max } => StoreError::TooLarge {
                size: *size,
                max: *max,
            },
            StoreError::Full => StoreError::Full,
            StoreError::InvalidConfig(why) => StoreError::InvalidConfig(why),
            StoreError::LeaseExpired => StoreError::LeaseExpired,
        }
    }
}

// The values Linux and the BSDs give these errors, to tell disk full from other I/O
// errors without a libc dependency.
const ENOSPC: i32 = 28;
#[cfg(target_os = "linux")]
const EDQUOT: i32 = 122;
#[cfg(not(target_os = "linux"))]
const EDQUOT: i32 = 69;

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io { op, path, source } => {
                write!(f, "{op} {}: {source}", path.display())
            }
            StoreError::Locked { dir } => write!(
                f,
                "{} is already open (by another process, or elsewhere in this one)",
                dir.display()
            ),
            StoreError::Corrupt {
                file,
                position,
                offset,
                reason,
            } => write!(
                f,
                "corrupt record in {} at byte {position} (offset {offset}): {reason}, with \
                 sound records after it; open with repair to truncate there",
                file.display()
            ),
            StoreError::Format { file, reason } => write!(f, "{}: {reason}", file.display()),
            StoreError::TooLarge { size, max } => {
                write!(
                    f,
                    "record of {size} bytes is larger than the limit of {max}"
                )
            }
            StoreError::Full => f.write_str(
                "the durable log is at its retention limit and its oldest segment is still \
                 being read",
            ),
            StoreError::InvalidConfig(why) => write!(f, "invalid durable configuration: {why}"),
            StoreError::LeaseExpired => f.write_str(
                "the delivery's lease ran out and its message was delivered again since",
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
