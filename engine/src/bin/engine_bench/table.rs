//! The rows of `engine.csv` and `engine_family.csv`: one timed step each,
//! `model,sm_count,kind,batch,tokens,ms_median,tok_s,copy_bandwidth_tb_s,date,commit`
//! (`copy_bandwidth_tb_s`: what the runner's copy kernel moved at start,
//! which describes an SM-limited slice to the operator cost model). Rows are
//! appended only to a file with the same header: one written by an older
//! engine-bench is refused rather than mixed.
//!
//! `commit` is the build's commit: `SERVETWIN_COMMIT` at run time, else the
//! value it had when the binary was built (`option_env!`), else `unknown`.
//! Read in the binary rather than set by a build script because a build
//! script belongs to the whole `engine` package: its output changing with
//! every commit would rebuild the library too, where `option_env!` makes
//! only this binary depend on the variable. Build with
//! `SERVETWIN_COMMIT=$(git rev-parse --short HEAD) cargo build ...` (or set
//! it where the binary runs).

use engine::runner::cuda::CudaRunner;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// The header of both files.
pub(crate) const HEADER: &str =
    "model,sm_count,kind,batch,tokens,ms_median,tok_s,copy_bandwidth_tb_s,date,commit";

/// The commit the results come from (see the module doc).
pub(crate) fn commit() -> String {
    resolve_commit(
        std::env::var("SERVETWIN_COMMIT").ok(),
        option_env!("SERVETWIN_COMMIT"),
    )
}

fn resolve_commit(run_time: Option<String>, build_time: Option<&str>) -> String {
    run_time
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            build_time
                .filter(|c| !c.trim().is_empty())
                .map(String::from)
        })
        .map(|c| c.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// What every row of one run shares.
#[derive(Debug, Clone)]
pub(crate) struct RunInfo {
    pub model: String,
    pub sm_count: usize,
    /// The runner's copy bandwidth at start, TB/s.
    pub copy_bandwidth_tb_s: f64,
    pub date: String,
    pub commit: String,
}

impl RunInfo {
    /// What the rows of `model` measured on `r` share: the runner's SM count
    /// and copy bandwidth, `date`, and this build's [`commit`].
    pub fn of_runner(model: &str, r: &CudaRunner, date: String) -> Self {
        Self {
            model: model.to_string(),
            sm_count: r.sm_count(),
            copy_bandwidth_tb_s: r.measured_copy_bandwidth() * 1e-12,
            date,
            commit: commit(),
        }
    }

    /// The model as one CSV cell: a model given as a directory may hold a
    /// comma or a quote, which would split it.
    pub fn model_cell(&self) -> String {
        self.model.replace([',', '"', '\n'], " ")
    }

    /// One row (with its newline): a step of `kind` (`decode` or `prefill`)
    /// at `batch` sequences and `tokens` (the decode context, or the prompt),
    /// `seconds` at the median, `produced` tokens per step.
    pub fn row(
        &self,
        kind: &str,
        batch: usize,
        tokens: usize,
        seconds: f64,
        produced: usize,
    ) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{},{},{kind},{batch},{tokens},{:.4},{:.1},{:.3},{},{}",
            self.model_cell(),
            self.sm_count,
            seconds * 1e3,
            produced as f64 / seconds,
            self.copy_bandwidth_tb_s,
            self.date,
            self.commit
        );
        s
    }
}

/// Appends `rows` to the CSV file at `path`, writing the header first when
/// the file is new or empty.
pub(crate) fn append(path: &Path, rows: &str) -> std::io::Result<()> {
    append_with_header(path, HEADER, rows)
}

/// Appends `rows` to the CSV at `path`, writing `header` first when the
/// file is new or empty; a file whose first line is another header is an
/// error (`InvalidData`) that says to write elsewhere.
pub(crate) fn append_with_header(path: &Path, header: &str, rows: &str) -> std::io::Result<()> {
    let fresh = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
    if !fresh {
        let text = std::fs::read_to_string(path)?;
        let first = text.lines().next().unwrap_or("");
        if first != header {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} has the columns {first:?}, this engine-bench writes {header:?}: \
                     give another --out (or move the file away)",
                    path.display()
                ),
            ));
        }
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    if fresh {
        writeln!(f, "{header}")?;
    }
    f.write_all(rows.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> RunInfo {
        RunInfo {
            model: "qwen3-8b".into(),
            sm_count: 32,
            copy_bandwidth_tb_s: 2.861,
            date: "2026-12-02T10:00:00Z".into(),
            commit: "abc1234".into(),
        }
    }

    #[test]
    fn a_row_has_the_headers_columns_in_order() {
        let row = info().row("decode", 64, 300, 0.0025, 64);
        assert_eq!(
            row,
            "qwen3-8b,32,decode,64,300,2.5000,25600.0,2.861,2026-12-02T10:00:00Z,abc1234\n"
        );
        let cells: Vec<&str> = row.trim_end().split(',').collect();
        let names: Vec<&str> = HEADER.split(',').collect();
        assert_eq!(cells.len(), names.len());
        assert_eq!(
            names,
            [
                "model",
                "sm_count",
                "kind",
                "batch",
                "tokens",
                "ms_median",
                "tok_s",
                "copy_bandwidth_tb_s",
                "date",
                "commit"
            ]
        );
        let dir = RunInfo {
            model: "/m/a,b".into(),
            ..info()
        };
        assert!(dir
            .row("prefill", 1, 512, 0.01, 512)
            .starts_with("/m/a b,32,prefill,1,512,"));
    }

    #[test]
    fn the_commit_is_the_run_times_then_the_build_times_then_unknown() {
        assert_eq!(resolve_commit(Some("r1".into()), Some("b1")), "r1");
        assert_eq!(resolve_commit(Some(" ".into()), Some("b1")), "b1");
        assert_eq!(resolve_commit(None, Some("b1\n")), "b1");
        assert_eq!(resolve_commit(None, None), "unknown");
        assert_eq!(resolve_commit(None, Some("")), "unknown");
    }

    #[test]
    fn appending_writes_the_header_once() {
        let dir = std::env::temp_dir().join(format!("engine-bench-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("engine_family.csv");
        let _ = std::fs::remove_file(&path);
        append(&path, &info().row("decode", 1, 300, 0.001, 1)).unwrap();
        append(&path, &info().row("prefill", 1, 512, 0.002, 512)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], HEADER);
        assert!(lines[1].contains(",decode,") && lines[2].contains(",prefill,"));
        // A file of an older layout is left as it is.
        let old = "model,sm_count,kind,batch,tokens,ms_median,tok_s,date,commit\n";
        std::fs::write(&path, old).unwrap();
        let e = append(&path, &info().row("decode", 1, 300, 0.001, 1)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("another --out"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), old);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
