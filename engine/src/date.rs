//! Dates for the records that runs write (benchmark CSVs, run summaries).
//!
//! Contract: stamps are UTC, to the second, as `YYYY-MM-DDTHH:MM:SSZ`,
//! formatted by the `time` crate. [`utc_date`] formats; [`utc_now`] reads the
//! system clock, the only clock read in this crate, and is for the binaries
//! and tools that stamp their output, never for the serving core.

use thiserror::Error;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::OffsetDateTime;

const STAMP: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");

#[derive(Debug, Clone, Error, PartialEq)]
pub enum DateError {
    #[error("{0} seconds since 1970 is past the year 9999")]
    OutOfRange(u64),
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    stamp(OffsetDateTime::now_utc())
}

/// Seconds since 1970 as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_date(secs: u64) -> Result<String, DateError> {
    let at = i64::try_from(secs)
        .ok()
        .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
        .ok_or(DateError::OutOfRange(secs))?;
    Ok(stamp(at))
}

fn stamp(at: OffsetDateTime) -> String {
    // Formatting into a String fails only for items a date-time lacks, and
    // STAMP names none of those.
    at.format(STAMP)
        .unwrap_or_else(|_| unreachable!("STAMP formats every OffsetDateTime"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc_date(0).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(utc_date(951_782_400).unwrap(), "2000-02-29T00:00:00Z");
        assert_eq!(utc_date(1_798_761_599).unwrap(), "2026-12-31T23:59:59Z");
        assert_eq!(utc_date(253_402_300_799).unwrap(), "9999-12-31T23:59:59Z");
        assert_eq!(
            utc_date(253_402_300_800),
            Err(DateError::OutOfRange(253_402_300_800))
        );
        assert_eq!(utc_date(u64::MAX), Err(DateError::OutOfRange(u64::MAX)));
    }

    #[test]
    fn now_has_the_stamp_format() {
        let now = utc_now();
        let b = now.as_bytes();
        assert_eq!(now.len(), 20, "{now}");
        for (i, sep) in [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'Z'),
        ] {
            assert_eq!(b[i], sep, "{now}");
        }
    }
}
