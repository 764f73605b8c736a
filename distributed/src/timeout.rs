//! The time limit of every collective: how long a rank waits for its peers before it gives up
//! with [`tessera_core::CommFailure::Timeout`] instead of hanging.

use std::time::Duration;
use tessera_core::{Error, Result};

/// Environment variable holding the time limit in seconds (a positive number, fractions
/// allowed), e.g. `TESSERA_DIST_TIMEOUT_S=60`.
pub const TIMEOUT_ENV_VAR: &str = "TESSERA_DIST_TIMEOUT_S";

/// The default time limit: 5 minutes. A collective waits for the slowest rank, so the limit
/// must exceed the longest stretch of work one rank does alone between two collectives (an
/// evaluation on rank 0, a checkpoint write), or healthy runs fail.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The time limit from [`TIMEOUT_ENV_VAR`], or [`DEFAULT_TIMEOUT`] when it is not set.
pub fn timeout_from_env() -> Result<Duration> {
    match std::env::var(TIMEOUT_ENV_VAR) {
        Err(_) => Ok(DEFAULT_TIMEOUT),
        Ok(text) => parse_timeout(&text),
    }
}

/// Parses a time limit in seconds.
pub fn parse_timeout(text: &str) -> Result<Duration> {
    let seconds: f64 = text.trim().parse().map_err(|_| Error::InvalidArgument {
        op: "timeout",
        msg: format!("{TIMEOUT_ENV_VAR}={text:?} is not a number of seconds"),
    })?;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(Error::InvalidArgument {
            op: "timeout",
            msg: format!("{TIMEOUT_ENV_VAR}={text:?} must be a positive number of seconds"),
        });
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_positive_seconds() {
        assert_eq!(parse_timeout("2.5").unwrap(), Duration::from_millis(2500));
        assert_eq!(parse_timeout(" 60 ").unwrap(), Duration::from_secs(60));
        for bad in ["", "0", "-1", "inf", "NaN", "ten"] {
            assert!(parse_timeout(bad).is_err(), "{bad:?}");
        }
    }
}
