//! `requests.csv` and `steps.csv`: the same files from real and simulated runs.
//!
//! Contract: a header row ([`REQUESTS_COLUMNS`], [`STEPS_COLUMNS`]), then one
//! row per record in the order stored; times in milliseconds with 6 decimals
//! (nanosecond resolution), so the same records always give byte-identical
//! files. Missing values (a request that never produced a token) are empty
//! fields. Rows are [`RequestRow`] and [`StepRow`] written by the `csv` crate,
//! which quotes a text field (RFC 4180) only when it holds a comma, a quote or
//! a line break; the same types read the files back.

use super::{median, RequestRecord, StepRecord};
use serde::{Deserialize, Serialize, Serializer};
use statrs::statistics::Statistics;
use std::io::{self, Write};

/// The columns of `requests.csv`, in order: [`RequestRow`]'s fields.
pub const REQUESTS_COLUMNS: [&str; 13] = [
    "id",
    "tag",
    "arrival_ms",
    "prompt_tokens",
    "max_tokens",
    "output_tokens",
    "cached_tokens",
    "preemptions",
    "ttft_ms",
    "finish_ms",
    "itl_median_ms",
    "itl_max_ms",
    "finish_reason",
];

/// The columns of `steps.csv`, in order: [`StepRow`]'s fields.
pub const STEPS_COLUMNS: [&str; 13] = [
    "engine",
    "start_ms",
    "duration_ms",
    "scheduled_tokens",
    "prefill_seqs",
    "decode_seqs",
    "prefill_tokens",
    "context_tokens",
    "max_context",
    "kv_blocks_used",
    "kv_blocks_total",
    "waiting_seqs",
    "running_seqs",
];

/// Milliseconds as the files write them: 6 decimals.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub f64);

impl Millis {
    pub fn from_seconds(seconds: f64) -> Self {
        Millis(seconds * 1e3)
    }
}

impl Serialize for Millis {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{:.6}", self.0))
    }
}

/// One row of `requests.csv`. The ITL columns are the median and maximum gap
/// between consecutive output tokens (empty with fewer than two tokens).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    pub id: u64,
    pub tag: String,
    pub arrival_ms: Millis,
    pub prompt_tokens: usize,
    pub max_tokens: usize,
    pub output_tokens: usize,
    pub cached_tokens: usize,
    pub preemptions: usize,
    pub ttft_ms: Option<Millis>,
    pub finish_ms: Option<Millis>,
    pub itl_median_ms: Option<Millis>,
    pub itl_max_ms: Option<Millis>,
    pub finish_reason: String,
}

impl From<&RequestRecord> for RequestRow {
    fn from(r: &RequestRecord) -> Self {
        let itls: Vec<f64> = r.itls_s().collect();
        let itl_max = (!itls.is_empty()).then(|| Statistics::max(&itls));
        Self {
            id: r.id,
            tag: r.tag.clone(),
            arrival_ms: Millis::from_seconds(r.arrival_s),
            prompt_tokens: r.prompt_tokens,
            max_tokens: r.max_tokens,
            output_tokens: r.output_tokens(),
            cached_tokens: r.cached_tokens,
            preemptions: r.preemptions,
            ttft_ms: r.ttft_s().map(Millis::from_seconds),
            finish_ms: r.finish_s.map(Millis::from_seconds),
            itl_median_ms: median(&itls).map(Millis::from_seconds),
            itl_max_ms: itl_max.map(Millis::from_seconds),
            finish_reason: r.finish_reason.clone(),
        }
    }
}

/// One row of `steps.csv`: every [`StepRecord`] field except the batch shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    pub engine: usize,
    pub start_ms: Millis,
    pub duration_ms: Millis,
    pub scheduled_tokens: usize,
    pub prefill_seqs: usize,
    pub decode_seqs: usize,
    pub prefill_tokens: usize,
    pub context_tokens: usize,
    pub max_context: usize,
    pub kv_blocks_used: usize,
    pub kv_blocks_total: usize,
    pub waiting_seqs: usize,
    pub running_seqs: usize,
}

impl From<&StepRecord> for StepRow {
    fn from(s: &StepRecord) -> Self {
        Self {
            engine: s.engine,
            start_ms: Millis::from_seconds(s.start_s),
            duration_ms: Millis::from_seconds(s.duration_s),
            scheduled_tokens: s.scheduled_tokens,
            prefill_seqs: s.prefill_seqs,
            decode_seqs: s.decode_seqs,
            prefill_tokens: s.prefill_tokens,
            context_tokens: s.context_tokens,
            max_context: s.max_context,
            kv_blocks_used: s.kv_blocks_used,
            kv_blocks_total: s.kv_blocks_total,
            waiting_seqs: s.waiting_seqs,
            running_seqs: s.running_seqs,
        }
    }
}

/// The writer of every CSV file the project writes: `,` between fields, `\n`
/// after each row, quotes only where needed. The caller writes the header
/// (so a file with no rows still has one).
pub fn csv_writer<W: Write>(out: W) -> ::csv::Writer<W> {
    ::csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(out)
}

fn write_rows<W: Write, R: Serialize>(
    out: W,
    columns: &[&str],
    rows: impl Iterator<Item = R>,
) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(columns)?;
    for row in rows {
        w.serialize(row)?;
    }
    w.flush()
}

/// `requests.csv`: one [`RequestRow`] per request.
pub fn write_requests_csv<W: Write>(out: W, requests: &[RequestRecord]) -> io::Result<()> {
    write_rows(
        out,
        &REQUESTS_COLUMNS,
        requests.iter().map(RequestRow::from),
    )
}

/// `steps.csv`: one [`StepRow`] per step.
pub fn write_steps_csv<W: Write>(out: W, steps: &[StepRecord]) -> io::Result<()> {
    write_rows(out, &STEPS_COLUMNS, steps.iter().map(StepRow::from))
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

    fn step() -> StepRecord {
        StepRecord {
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
            kv_blocks_total: 100,
            waiting_seqs: 4,
            running_seqs: 3,
            shape: BatchShape::default(),
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
        assert_eq!(lines[0], REQUESTS_COLUMNS.join(","));
        assert_eq!(
            lines[1],
            "3,\"a,b\",500.000000,10,4,3,0,1,250.000000,2000.000000,625.000000,1000.000000,length"
        );
        assert_eq!(lines[2], "3,plain,500.000000,10,4,0,0,1,,,,,length");
    }

    #[test]
    fn step_rows_have_one_column_per_header_field() {
        let mut buf = Vec::new();
        write_steps_csv(&mut buf, &[step()]).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text.lines().next(), Some(STEPS_COLUMNS.join(",").as_str()));
        let row = text.lines().nth(1).unwrap();
        assert_eq!(row, "0,1.000000,0.500000,5,1,2,3,40,20,7,100,4,3");
    }

    #[test]
    fn no_records_still_give_the_header() {
        let mut buf = Vec::new();
        write_requests_csv(&mut buf, &[]).unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            format!("{}\n", REQUESTS_COLUMNS.join(","))
        );
    }

    /// The header `csv` derives from a row type's field names.
    fn derived_header<T: Serialize>(row: &T) -> String {
        let mut w = ::csv::Writer::from_writer(Vec::new());
        w.serialize(row).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        text.lines().next().unwrap().to_string()
    }

    #[test]
    fn columns_are_the_row_fields_in_order() {
        let request = RequestRow::from(&request("t", vec![1.0]));
        assert_eq!(derived_header(&request), REQUESTS_COLUMNS.join(","));
        assert_eq!(
            derived_header(&StepRow::from(&step())),
            STEPS_COLUMNS.join(",")
        );
    }

    #[test]
    fn a_tag_with_a_comma_a_quote_and_a_newline_round_trips() {
        let tag = "tenant \"a\", batch 2\nsecond line";
        let records = [request(tag, vec![0.75, 1.0, 2.0]), request("x", vec![])];
        let mut buf = Vec::new();
        write_requests_csv(&mut buf, &records).unwrap();
        let mut reader = ::csv::Reader::from_reader(buf.as_slice());
        let headers = reader.headers().unwrap().clone();
        assert_eq!(headers.iter().collect::<Vec<_>>(), REQUESTS_COLUMNS);
        let rows: Vec<RequestRow> = reader.deserialize().collect::<Result<_, _>>().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].tag, tag);
        assert_eq!(rows[0], RequestRow::from(&records[0]));
        assert_eq!(rows[1].ttft_ms, None);
        assert_eq!(rows[1], RequestRow::from(&records[1]));
    }
}
