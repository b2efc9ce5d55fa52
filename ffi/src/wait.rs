//! Waiting on plain threads for the calls that take `timeout_ms`.
//!
//! Receives and publishes use memq-core's own `_blocking` and `_blocking_timeout`
//! methods, which park the calling thread until memq wakes it or the deadline passes.

use core::time::Duration;

/// How long a call may wait, from a `timeout_ms` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// `timeout_ms == 0`: do not wait.
    Try,
    /// `timeout_ms < 0`: wait as long as it takes.
    Forever,
    /// `timeout_ms > 0`.
    For(Duration),
}

impl Wait {
    pub(crate) fn from_ms(timeout_ms: i64) -> Self {
        match timeout_ms {
            0 => Self::Try,
            ..0 => Self::Forever,
            ms => Self::For(Duration::from_millis(ms.unsigned_abs())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_from_c() {
        assert_eq!(Wait::from_ms(0), Wait::Try);
        assert_eq!(Wait::from_ms(-1), Wait::Forever);
        assert_eq!(Wait::from_ms(i64::MIN), Wait::Forever);
        assert_eq!(Wait::from_ms(5), Wait::For(Duration::from_millis(5)));
        assert_eq!(
            Wait::from_ms(i64::MAX),
            Wait::For(Duration::from_millis(i64::MAX as u64))
        );
    }
}
