//! `requests.csv` and `steps.csv`: the same files from real and simulated runs.
//!
//! Contract: a header row, then one row per record in the order stored; times
//! in milliseconds with 6 decimals (nanosecond resolution), so the same
//! records always give byte-identical files. Missing values (a request that
//! never produced a token) are empty fields. Text fields are quoted per RFC
//! 4180 only when they contain a comma, a quote or a line break.

use super::percentile::percentile_sorted;
use super::{RequestRecord, StepRecord};
use std::io::{self, Write};

pub const REQUESTS_CSV_HEADER: &str = "id,tag,arrival_ms,prompt_tokens,max_tokens,output_tokens,\
cached_tokens,preemptions,ttft_ms,finish_ms,itl_median_ms,itl_max_ms,finish_reason";

pub const STEPS_CSV_HEADER: &str = "engine,start_ms,duration_ms,scheduled_tokens,prefill_seqs,\
decode_seqs,prefill_tokens,context_tokens,max_context,kv_blocks_used";

/// Milliseconds, or an empty field.
struct Ms(Option<f64>);

impl std::fmt::Display for Ms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(s) => write!(f, "{:.6}", s * 1e3),
            None => Ok(()),
        }
    }
}

/// A text field, quoted when it must be.
struct Text<'a>(&'a str);

impl std::fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.contains([',', '"', '\n', '\r']) {
            write!(f, "\"{}\"", self.0.replace('"', "\"\""))
        } else {
            f.write_str(self.0)
        }
    }
}

/// One row per request; ITL columns are the median and maximum gap between
/// consecutive output tokens (empty with fewer than two tokens).
pub fn write_requests_csv<W: Write>(mut out: W, requests: &[RequestRecord]) -> io::Result<()> {
    writeln!(out, "{REQUESTS_CSV_HEADER}")?;
    let mut itls = Vec::new();
    for r in requests {
        itls.clear();
        itls.extend(r.itls_s());
        itls.sort_by(f64::total_cmp);
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.id,
            Text(&r.tag),
            Ms(Some(r.arrival_s)),
            r.prompt_tokens,
            r.max_tokens,
            r.output_tokens(),
            r.cached_tokens,
            r.preemptions,
            Ms(r.ttft_s()),
            Ms(r.finish_s),
            Ms(percentile_sorted(&itls, 50.0)),
            Ms(itls.last().copied()),
            Text(&r.finish_reason),
        )?;
    }
    out.flush()
}

/// One row per step, every [`StepRecord`] field except the batch shape.
pub fn write_steps_csv<W: Write>(mut out: W, steps: &[StepRecord]) -> io::Result<()> {
    writeln!(out, "{STEPS_CSV_HEADER}")?;
    for s in steps {
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            s.engine,
            Ms(Some(s.start_s)),
            Ms(Some(s.duration_s)),
            s.scheduled_tokens,
            s.prefill_seqs,
            s.decode_seqs,
            s.prefill_tokens,
            s.context_tokens,
            s.max_context,
            s.kv_blocks_used,
        )?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::BatchShape;

    fn request(tag: &str, token_times_s: Vec<f64>) -> RequestRecord {
        RequestRecord {
            id: 3,
            tag: tag.to_string(),
            arrival_s: 0.5,
            prompt_tokens: 10,
            max_tokens: 4,
            cached_tokens: 0,
            preemptions: 1,
            finish_s: token_times_s.last().copied(),
            token_times_s,
            finish_reason: "length".to_string(),
        }
    }

    #[test]
    fn request_rows_carry_ttft_itl_and_quote_tags() {
        let mut buf = Vec::new();
        let rows = [
            request("a,b", vec![0.75, 1.0, 2.0]),
            request("plain", vec![]),
        ];
        write_requests_csv(&mut buf, &rows).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], REQUESTS_CSV_HEADER);
        assert_eq!(
            lines[1],
            "3,\"a,b\",500.000000,10,4,3,0,1,250.000000,2000.000000,625.000000,1000.000000,length"
        );
        assert_eq!(lines[2], "3,plain,500.000000,10,4,0,0,1,,,,,length");
    }

    #[test]
    fn step_rows_have_one_column_per_header_field() {
        let step = StepRecord {
            engine: 0,
            start_s: 0.001,
            duration_s: 0.0005,
            scheduled_tokens: 5,
            prefill_seqs: 1,
            decode_seqs: 2,
            prefill_tokens: 3,
            context_tokens: 40,
            max_context: 20,
            kv_blocks_used: 7,
            shape: BatchShape::default(),
        };
        let mut buf = Vec::new();
        write_steps_csv(&mut buf, &[step]).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let row = text.lines().nth(1).unwrap();
        assert_eq!(row, "0,1.000000,0.500000,5,1,2,3,40,20,7");
        assert_eq!(row.split(',').count(), STEPS_CSV_HEADER.split(',').count());
    }
}
