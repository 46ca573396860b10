//! Dates for the records that runs write (benchmark CSVs, run summaries).
//!
//! Contract: stamps are UTC, to the second, as `YYYY-MM-DDTHH:MM:SSZ`,
//! formatted by the `time` crate. [`utc_date`] formats; [`utc_now`] reads the
//! system clock, the only clock read in this crate, and is for the binaries
//! and tools that stamp their output, never for the serving core.
//! [`output_date`] is the stamp of a reproducible output: the
//! reproducible-builds.org `SOURCE_DATE_EPOCH` convention (whole seconds
//! since 1970-01-01 UTC) when that variable is set, the clock otherwise; a
//! set value that is not such a number is an error naming the variable.

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
    #[error(
        "{SOURCE_DATE_EPOCH} = {value:?} is not a date: give whole seconds since 1970-01-01 \
         UTC (e.g. `date +%s`), or unset it to stamp the current date"
    )]
    BadSourceDateEpoch { value: String },
}

/// The reproducible-builds.org variable that fixes the date outputs carry.
pub const SOURCE_DATE_EPOCH: &str = "SOURCE_DATE_EPOCH";

/// The date to stamp an output with: `SOURCE_DATE_EPOCH` when set (see the
/// module docs), else now.
pub fn output_date() -> Result<String, DateError> {
    match std::env::var_os(SOURCE_DATE_EPOCH) {
        None => Ok(utc_now()),
        Some(value) => source_date(&value.to_string_lossy()),
    }
}

/// `SOURCE_DATE_EPOCH`'s value as a stamp: decimal digits only (no sign,
/// no spaces, no fraction), at most the year 9999.
pub fn source_date(value: &str) -> Result<String, DateError> {
    let bad = || DateError::BadSourceDateEpoch {
        value: value.to_string(),
    };
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let secs: u64 = value.parse().map_err(|_| bad())?;
    utc_date(secs).map_err(|_| bad())
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
    fn source_date_epoch_values() {
        assert_eq!(source_date("0").unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(source_date("1796342400").unwrap(), "2026-12-04T00:00:00Z");
        for bad in [
            "",
            " 1",
            "1.5",
            "-1",
            "+1",
            "1e9",
            "soon",
            "253402300800",
            "99999999999999999999",
        ] {
            let err = source_date(bad).unwrap_err().to_string();
            assert!(err.starts_with("SOURCE_DATE_EPOCH = "), "{bad}: {err}");
            assert!(err.contains("date +%s"), "{bad}: {err}");
        }
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
