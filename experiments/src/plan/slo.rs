//! Latency targets (`--slo ttft_p99_ms=...,itl_p99_ms=...`).
//!
//! Contract: both targets are the 99th percentile (the project's one
//! percentile method) in milliseconds and must be positive finite numbers. A
//! key left out keeps its default: TTFT p99 2000 ms (an interactive reply
//! starts within two seconds) and ITL p99 100 ms (ten tokens a second, faster
//! than reading speed). Unknown or repeated keys and malformed values fail
//! naming the key.

use super::error::PlanError;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Slo {
    pub ttft_p99_ms: f64,
    pub itl_p99_ms: f64,
}

impl Default for Slo {
    fn default() -> Self {
        Self {
            ttft_p99_ms: 2000.0,
            itl_p99_ms: 100.0,
        }
    }
}

const KEYS: &str = "ttft_p99_ms, itl_p99_ms";

impl Slo {
    /// Parses `key=value[,key=value]`; keys not given keep their defaults.
    pub fn parse(text: &str) -> Result<Self, PlanError> {
        let err = |message: String| PlanError::BadSlo {
            text: text.to_string(),
            message,
        };
        let mut slo = Self::default();
        let mut seen: Vec<&str> = Vec::new();
        for item in text.split(',').map(str::trim) {
            let (key, value) = item.split_once('=').ok_or_else(|| {
                err(format!(
                    "`{item}` is not key=value; expected e.g. ttft_p99_ms=2000,itl_p99_ms=100"
                ))
            })?;
            let (key, value) = (key.trim(), value.trim());
            let ms: f64 = value
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v > 0.0)
                .ok_or_else(|| {
                    err(format!(
                        "{key} = `{value}`: expected a positive number of milliseconds"
                    ))
                })?;
            if seen.contains(&key) {
                return Err(err(format!("{key} is given twice")));
            }
            match key {
                "ttft_p99_ms" => slo.ttft_p99_ms = ms,
                "itl_p99_ms" => slo.itl_p99_ms = ms,
                other => return Err(err(format!("unknown target `{other}`; known: {KEYS}"))),
            }
            seen.push(key);
        }
        Ok(slo)
    }

    /// Whether measured p99s meet both targets; a run with no inter-token gap
    /// (one output token per request) meets the ITL target.
    pub fn met_by(&self, ttft_p99_ms: f64, itl_p99_ms: Option<f64>) -> bool {
        ttft_p99_ms <= self.ttft_p99_ms && itl_p99_ms.is_none_or(|itl| itl <= self.itl_p99_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_keys_and_keeps_defaults_for_missing_ones() {
        let s = Slo::parse("ttft_p99_ms=500, itl_p99_ms=40.5").unwrap();
        assert_eq!((s.ttft_p99_ms, s.itl_p99_ms), (500.0, 40.5));
        let s = Slo::parse("itl_p99_ms=20").unwrap();
        assert_eq!((s.ttft_p99_ms, s.itl_p99_ms), (2000.0, 20.0));
    }

    #[test]
    fn bad_input_names_the_problem() {
        for (text, needle) in [
            ("ttft=5", "unknown target `ttft`"),
            ("ttft_p99_ms=fast", "ttft_p99_ms = `fast`"),
            ("itl_p99_ms=-1", "positive number"),
            ("itl_p99_ms=0", "positive number"),
            ("ttft_p99_ms", "not key=value"),
            ("itl_p99_ms=5,itl_p99_ms=6", "given twice"),
        ] {
            let msg = Slo::parse(text).unwrap_err().to_string();
            assert!(
                msg.contains(needle) && msg.contains("--slo"),
                "{text}: {msg}"
            );
        }
    }

    #[test]
    fn met_by_compares_both_targets() {
        let s = Slo::default();
        assert!(s.met_by(2000.0, Some(100.0)));
        assert!(!s.met_by(2000.1, Some(1.0)));
        assert!(!s.met_by(1.0, Some(100.1)));
        assert!(s.met_by(1.0, None));
    }
}
