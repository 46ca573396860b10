//! The plan's files: `plan.csv`, `plan_search.csv`, `plan_curve.csv`, the
//! latency-vs-rate figures, `assumptions.txt` and `meta.ron`.
//!
//! Contract: numbers use the experiments' table format (3 decimals, empty
//! cell for "none"); `plan.csv` has exactly [`PLAN_COLUMNS`], one row per
//! GPU in the order asked. `assumptions.txt` states, per GPU, what priced
//! its steps, the transfer assumptions (or that the roofline fallback was
//! used), the workload, the SLO and the search method; the same text is
//! printed unless `--quiet`.

use super::cost::kv_capacity_tokens;
use super::error::PlanError;
use super::evaluate::{decode_context, GpuPlan, CURVE_FRACTIONS, PREFILL_TOKENS};
use super::inputs::PlanInputs;
use super::search::SearchMethod;
use super::slo::Slo;
use crate::backend::CostBasis;
use crate::charts::{self, ChartSpec};
use crate::output::git_commit;
use crate::table::{Cell, Table};
use engine::EngineConfig;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub const PLAN_COLUMNS: &[&str] = &[
    "gpu",
    "decode_step_b1_ms",
    "decode_step_b16_ms",
    "decode_step_b64_ms",
    "prefill_tok_s_3200",
    "kv_capacity_tokens",
    "max_qps_under_slo",
    "best_max_num_batched_tokens",
    "best_max_num_seqs",
    "requests_per_run",
    "steady_state",
    "note",
    "expected_error_decode_pct",
    "expected_error_prefill_pct",
    "expected_error_qps_pct",
    "max_qps_low",
    "max_qps_high",
    "off_measured_ground",
];

const SEARCH_COLUMNS: &[&str] = &[
    "gpu",
    "max_num_batched_tokens",
    "max_num_seqs",
    "kv_capacity_tokens",
    "max_qps",
    "saturation_rps",
    "ttft_p99_ms",
    "itl_p99_ms",
    "preemptions",
    "runs",
    "requests_per_run",
    "steady_state",
    "note",
];

const CURVE_COLUMNS: &[&str] = &[
    "gpu",
    "max_num_batched_tokens",
    "max_num_seqs",
    "rate_per_s",
    "fraction_of_max",
    "ttft_p99_ms",
    "itl_p99_ms",
    "meets_slo",
];

pub fn plan_table(plans: &[GpuPlan]) -> Table {
    let mut t = Table::new(PLAN_COLUMNS);
    for p in plans {
        let r = &p.row;
        let mut row = vec![Cell::text(&r.gpu)];
        row.extend(r.decode_step_ms.iter().map(|ms| Cell::num(Some(*ms))));
        row.extend([
            Cell::num(Some(r.prefill_tok_s_3200)),
            Cell::int(r.kv_capacity_tokens),
            Cell::num(Some(r.max_qps_under_slo)),
            r.best_max_num_batched_tokens.map_or(Cell::Empty, Cell::int),
            r.best_max_num_seqs.map_or(Cell::Empty, Cell::int),
            r.requests_per_run.map_or(Cell::Empty, Cell::int),
            Cell::text(r.steady_state.map_or("", |s| s.word())),
            Cell::text(r.note.clone().unwrap_or_default()),
        ]);
        let e = r.expected_error.as_ref();
        row.extend([
            Cell::num(e.map(|e| e.decode_pct)),
            Cell::num(e.map(|e| e.prefill_pct)),
            Cell::num(r.qps_error_pct()),
            Cell::num(r.max_qps_band.map(|b| b.0)),
            Cell::num(r.max_qps_band.map(|b| b.1)),
            Cell::text(e.map(|e| e.off_ground.join("; ")).unwrap_or_default()),
        ]);
        t.push(row);
    }
    t
}

fn search_table(plans: &[GpuPlan], block_size: usize) -> Table {
    let mut t = Table::new(SEARCH_COLUMNS);
    for p in plans {
        for r in &p.results {
            let at = r.at_max.as_ref();
            t.push(vec![
                Cell::text(&p.row.gpu),
                Cell::int(r.max_num_batched_tokens),
                Cell::int(r.max_num_seqs),
                Cell::int(kv_capacity_tokens(r.kv_blocks, block_size)),
                Cell::num(Some(r.max_qps)),
                Cell::num(r.saturation_rps),
                Cell::num(at.map(|a| a.ttft_p99_ms)),
                Cell::num(at.and_then(|a| a.itl_p99_ms)),
                at.map_or(Cell::Empty, |a| Cell::int(a.preemptions)),
                Cell::int(r.runs),
                Cell::int(r.requests),
                Cell::text(r.steady.word()),
                Cell::text(r.note.clone().unwrap_or_default()),
            ]);
        }
    }
    t
}

fn curve_table(plans: &[GpuPlan]) -> Table {
    let mut t = Table::new(CURVE_COLUMNS);
    for p in plans {
        let (Some(b), Some(s)) = (p.row.best_max_num_batched_tokens, p.row.best_max_num_seqs)
        else {
            continue;
        };
        for (point, fraction) in p.curve.iter().zip(CURVE_FRACTIONS) {
            t.push(vec![
                Cell::text(&p.row.gpu),
                Cell::int(b),
                Cell::int(s),
                Cell::num(Some(point.rate_per_s)),
                Cell::num(Some(fraction)),
                Cell::num(Some(point.ttft_p99_ms)),
                Cell::num(point.itl_p99_ms),
                Cell::text(if point.meets_slo { "yes" } else { "no" }),
            ]);
        }
    }
    t
}

/// The plan figures' subtitle: the GPUs grouped by what priced their steps,
/// the model, the workload and the SLO.
pub fn figure_subtitle(inputs: &PlanInputs, plans: &[GpuPlan]) -> String {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for p in plans {
        let cost = p.target.cost().short_label();
        match groups.iter_mut().find(|(c, _)| *c == cost) {
            Some((_, gpus)) => gpus.push(&p.row.gpu),
            None => groups.push((cost, vec![&p.row.gpu])),
        }
    }
    let gpus: Vec<String> = groups
        .iter()
        .map(|(cost, gpus)| format!("{}: {cost}", gpus.join(", ")))
        .collect();
    format!(
        "sim, {} · {}\nworkload: {} · SLO: TTFT p99 <= {} ms, ITL p99 <= {} ms",
        inputs.model_name,
        gpus.join("; "),
        inputs.workload.describe(),
        inputs.slo.ttft_p99_ms,
        inputs.slo.itl_p99_ms
    )
}

/// TTFT p99 and ITL p99 vs rate at each GPU's best setting, the SLO as a
/// target line; the y axis turns log when the latencies span decades.
pub fn charts(plans: &[GpuPlan], slo: &Slo) -> Vec<ChartSpec> {
    let chart =
        |stem: &str, what: &str, target: f64, y: fn(&super::search::RatePoint) -> Option<f64>| {
            let mut spec = ChartSpec::new(
                stem,
                &format!("{what} p99 vs request rate, best settings per GPU"),
                "request rate (requests/s, Poisson)",
                &format!("{what} p99 (ms)"),
            )
            .log_x()
            .y_scale(figures::YScale::Auto)
            .reference(format!("{what} SLO {target} ms (target)"), target);
            for p in plans.iter().filter(|p| !p.curve.is_empty()) {
                let label = format!(
                    "{} (batched {}, seqs {})",
                    p.row.gpu,
                    p.row.best_max_num_batched_tokens.unwrap_or(0),
                    p.row.best_max_num_seqs.unwrap_or(0)
                );
                let points = p
                    .curve
                    .iter()
                    .filter_map(|c| y(c).map(|v| (c.rate_per_s, v)))
                    .collect();
                spec = spec.series(label, points);
            }
            spec
        };
    vec![
        chart("plan_ttft_p99", "TTFT", slo.ttft_p99_ms, |c| {
            Some(c.ttft_p99_ms)
        }),
        chart("plan_itl_p99", "ITL", slo.itl_p99_ms, |c| c.itl_p99_ms),
    ]
}

/// The assumptions and method, for `assumptions.txt` and stdout.
pub fn assumptions_text(inputs: &PlanInputs, plans: &[GpuPlan]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "exp plan: model {}", inputs.model_name);
    let _ = writeln!(s, "\nCost model per GPU:");
    for p in plans {
        let _ = writeln!(s, "  {}: {}", p.row.gpu, p.target.cost().description);
        if let Some(e) = &p.row.expected_error {
            let _ = writeln!(
                s,
                "    expected error (held out): decode step {:.2} ms \u{b1}{:.0} %, prefill \
                 {:.0} tok/s \u{b1}{:.0} %, max QPS under the SLO {:.2} \u{b1}{:.0} %{}",
                p.row.decode_step_ms[0],
                e.decode_pct,
                p.row.prefill_tok_s_3200,
                e.prefill_pct,
                p.row.max_qps_under_slo,
                p.row.qps_error_pct().unwrap_or(e.step_pct()),
                p.row
                    .max_qps_band
                    .map_or(String::new(), |(low, high)| format!(
                        " ({low:.2}-{high:.2} with every step off by the held-out error)"
                    ))
            );
            for note in &e.off_ground {
                let _ = writeln!(s, "    off the measured ground: {note}");
            }
        }
    }
    if plans.iter().any(|p| p.target.cost().is_transferred()) {
        let _ = writeln!(
            s,
            "\nTransfer assumptions: {}",
            calibration::transfer::ASSUMPTIONS
        );
    }
    if plans
        .iter()
        .any(|p| p.target.cost().basis == CostBasis::Roofline)
    {
        let d = sim::RooflineEfficiencies::default();
        let _ = writeln!(
            s,
            "\nNo calibrated profile for this model's shape (give --profile FILE or \
             --profiles-dir DIR): steps are priced by the datasheet roofline (sim's \
             RooflineModel) with its default efficiencies ({:.0} us per step; linear layers at {} of peak bandwidth and \
             {} of peak FLOP/s); treat the numbers as a first estimate.",
            d.step_overhead_s * 1e6,
            d.linear.memory,
            d.linear.compute
        );
    }
    let (m, e) = (&inputs.method, &inputs.engine);
    let _ = writeln!(
        s,
        "\nWorkload: {}.\nSLO: TTFT p99 <= {} ms and ITL p99 <= {} ms.\n\
         KV capacity: sim::cost::kv_cache_blocks (datasheet memory and model shape, whatever \
         prices the steps): memory x gpu_memory_utilization ({}) \
         - weights - activation reserve (runtime 512 MiB + activations of max_num_batched_tokens \
         + fp32 logits of max_num_seqs), in blocks of {} tokens; kv_capacity_tokens leaves out the \
         null block and is given at the best setting.\n\
         Per-step figures: decode steps of B sequences at {} tokens of context (the workload's \
         mean prompt + half its mean output); prefill_tok_s_3200 is one step prefilling a fresh \
         {PREFILL_TOKENS}-token prompt.\n\
         Search: grid max_num_batched_tokens {:?} x max_num_seqs {:?}, in parallel; per setting \
         the highest Poisson rate meeting the SLO, searched at {} requests per run (seed {}, same \
         requests at every rate, gaps rescaled), first {}% by arrival left out as warm-up, p99 by \
         linear interpolation (numpy default). A check with requests running alone comes first \
         (0 if it fails); the saturation rate (completions per second with a burst of \
         max(requests per run, {} x max_num_seqs) requests queued at once) caps the search, since \
         a queue fed faster grows without bound; then doubling from half the saturation rate (or \
         halving) and bisection to within a quarter of {}%. Steady state: a synthetic \
         workload's search is repeated at twice the requests per run, starting from the last \
         answer, until two lengths agree within {}% (steady_state \"converged\"; requests_per_run is the longer \
         one) or the next length would pass max_requests = {} (\"not converged\", with a note); \
         a trace is replayed whole (\"whole trace\"). Best setting: highest rate, ties to fewer \
         sequences then fewer batched tokens; one at an end of the grid is noted, as the grid \
         may not hold the best.",
        inputs.workload.describe(),
        inputs.slo.ttft_p99_ms,
        inputs.slo.itl_p99_ms,
        e.gpu_memory_utilization,
        e.block_size,
        decode_context(inputs),
        inputs.batched_tokens,
        inputs.num_seqs,
        m.requests,
        m.seed,
        m.warmup_pct,
        super::search::SATURATION_BATCHES,
        m.precision_pct,
        m.precision_pct / 2.0,
        m.max_requests,
    );
    let notes: Vec<String> = plans
        .iter()
        .filter_map(|p| p.row.note.as_ref().map(|n| format!("  {}: {n}", p.row.gpu)))
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(s, "\nNotes:\n{}", notes.join("\n"));
    }
    if let Some(fleet) = &inputs.fleet {
        s.push_str(&super::fleet_output::assumptions(fleet, inputs));
    }
    s
}

#[derive(Serialize)]
struct GpuMeta<'a> {
    gpu: &'a sim::GpuSpec,
    basis: &'a CostBasis,
    row: &'a super::evaluate::PlanRow,
}

#[derive(Serialize)]
struct Meta<'a> {
    model: &'a str,
    /// Base engine options; the two grid keys below replace its
    /// `max_num_batched_tokens` and `max_num_seqs`.
    engine: &'a EngineConfig,
    grid_max_num_batched_tokens: &'a [usize],
    grid_max_num_seqs: &'a [usize],
    slo: &'a Slo,
    workload: String,
    method: &'a SearchMethod,
    decode_context_tokens: usize,
    profile: Option<&'a String>,
    gpus: Vec<GpuMeta<'a>>,
    /// Present only when a fleet was sized.
    #[serde(skip_serializing_if = "Option::is_none")]
    fleet: Option<super::fleet_output::FleetMeta<'a>>,
    commit: String,
    date_utc: String,
}

pub(super) fn write(path: PathBuf, text: &str, files: &mut Vec<PathBuf>) -> Result<(), PlanError> {
    std::fs::write(&path, text).map_err(|error| PlanError::Io {
        path: path.clone(),
        error,
    })?;
    files.push(path);
    Ok(())
}

/// Writes every plan file into `dir`; returns their paths.
pub fn write_all(
    inputs: &PlanInputs,
    plans: &[GpuPlan],
    dir: &Path,
) -> Result<Vec<PathBuf>, PlanError> {
    std::fs::create_dir_all(dir).map_err(|error| PlanError::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let mut files = Vec::new();
    write(
        dir.join("plan.csv"),
        &plan_table(plans).to_csv(),
        &mut files,
    )?;
    let search = search_table(plans, inputs.engine.block_size);
    write(dir.join("plan_search.csv"), &search.to_csv(), &mut files)?;
    write(
        dir.join("plan_curve.csv"),
        &curve_table(plans).to_csv(),
        &mut files,
    )?;
    write(
        dir.join("assumptions.txt"),
        &assumptions_text(inputs, plans),
        &mut files,
    )?;
    let meta = Meta {
        model: &inputs.model_name,
        engine: &inputs.engine,
        grid_max_num_batched_tokens: &inputs.batched_tokens,
        grid_max_num_seqs: &inputs.num_seqs,
        slo: &inputs.slo,
        workload: inputs.workload.describe(),
        method: &inputs.method,
        decode_context_tokens: decode_context(inputs),
        profile: inputs.profile.as_ref(),
        gpus: plans
            .iter()
            .map(|p| GpuMeta {
                gpu: &p.target.cost().gpu,
                basis: &p.target.cost().basis,
                row: &p.row,
            })
            .collect(),
        fleet: inputs
            .fleet
            .as_ref()
            .map(|f| super::fleet_output::meta(inputs, f, plans)),
        commit: git_commit(),
        date_utc: inputs.date_utc.clone(),
    };
    let text = ron::ser::to_string_pretty(&meta, ron::ser::PrettyConfig::default())
        .map_err(|e| PlanError::Meta(e.to_string()))?;
    write(dir.join("meta.ron"), &text, &mut files)?;
    let subtitle = figure_subtitle(inputs, plans);
    for spec in charts(plans, &inputs.slo) {
        let drawn =
            charts::draw(&[(figures::Source::Sim, &spec)], dir, &subtitle).map_err(|e| {
                PlanError::Figure {
                    stem: spec.stem.clone(),
                    message: e.to_string(),
                }
            })?;
        files.extend(drawn);
    }
    if let Some(fleet) = &inputs.fleet {
        super::fleet_output::write_all(inputs, fleet, plans, dir, &subtitle, &mut files)?;
    }
    Ok(files)
}
