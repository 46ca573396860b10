//! The fleet plan's files: `fleet_plan.csv`, `fleet_search.csv` and the
//! figures `fleet_usd_per_hour`, `fleet_usd_per_million_output_tokens`,
//! `fleet_ttft_p99` and `fleet_itl_p99`, written only when a fleet is sized.
//!
//! Contract: `fleet_plan.csv` has exactly [`FLEET_COLUMNS`], one row per
//! GPU in the order asked: the cheapest fleet of that GPU
//! ([`super::fleet_size::cheapest`]) with its setting, router and p99s.
//! `usd_per_hour` is replicas x the GPU's price; `output_tokens_per_s` is
//! the offered load (rate x the workload's mean output tokens, all of
//! which a fleet meeting the SLO serves); `usd_per_million_output_tokens`
//! is `usd_per_hour / (output_tokens_per_s x 3600) x 1e6`. A GPU with no
//! fleet meeting the SLO has empty fleet cells and a note saying why. A GPU
//! without a price (possible only with `--gpu all`) is sized all the same;
//! its price cells are empty, its `price_source` is `unpriced: no entry in
//! FILE`, and the cost figures leave it out.
//! `fleet_search.csv` has one row per (GPU, setting) with every probe.

use super::error::PlanError;
use super::evaluate::GpuPlan;
use super::fleet_size::{cheapest, FleetSearch};
use super::inputs::{FleetTarget, PlanInputs};
use super::output::write;
use super::prices::GpuPrice;
use super::search::SettingResult;
use crate::charts::{self, ChartSpec};
use crate::table::{Cell, Table};
use serde::Serialize;
use std::path::{Path, PathBuf};

pub const FLEET_COLUMNS: &[&str] = &[
    "gpu",
    "qps",
    "replicas",
    "router",
    "max_num_batched_tokens",
    "max_num_seqs",
    "single_engine_max_qps",
    "ttft_p99_ms",
    "itl_p99_ms",
    "requests_per_run",
    "usd_per_gpu_hour",
    "usd_per_hour",
    "output_tokens_per_s",
    "usd_per_million_output_tokens",
    "price_source",
    "note",
];

const SEARCH_COLUMNS: &[&str] = &[
    "gpu",
    "max_num_batched_tokens",
    "max_num_seqs",
    "single_engine_max_qps",
    "saturation_rps",
    "lower_bound",
    "first_probe",
    "replicas",
    "probes",
    "ttft_p99_ms",
    "itl_p99_ms",
    "note",
];

/// One row of `fleet_plan.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetRow {
    pub gpu: String,
    pub qps: f64,
    pub replicas: Option<usize>,
    pub router: &'static str,
    pub max_num_batched_tokens: Option<usize>,
    pub max_num_seqs: Option<usize>,
    pub single_engine_max_qps: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub requests_per_run: Option<usize>,
    /// `None`: the GPU has no price (`--gpu all`).
    pub usd_per_gpu_hour: Option<f64>,
    pub usd_per_hour: Option<f64>,
    pub output_tokens_per_s: f64,
    pub usd_per_million_output_tokens: Option<f64>,
    pub price_source: String,
    pub note: Option<String>,
}

/// The GPU's cheapest sized setting and its fleet.
fn chosen(plan: &GpuPlan) -> Option<(&SettingResult, &FleetSearch)> {
    let sized: Vec<(&SettingResult, Option<&FleetSearch>)> = plan
        .results
        .iter()
        .zip(&plan.fleets)
        .map(|(s, f)| (s, f.as_ref()))
        .collect();
    let i = cheapest(&sized)?;
    Some((sized[i].0, sized[i].1?))
}

/// Why a GPU has no fleet: the first sized setting's note, else the
/// single-engine reason.
fn no_fleet_note(plan: &GpuPlan) -> String {
    if let Some(note) = plan.fleets.iter().flatten().find_map(|f| f.note.clone()) {
        return format!("no fleet meets the SLO: {note}");
    }
    let why = plan.row.note.clone().unwrap_or_default();
    format!("no fleet meets the SLO: no setting meets it on one engine ({why})")
}

pub fn fleet_rows(inputs: &PlanInputs, fleet: &FleetTarget, plans: &[GpuPlan]) -> Vec<FleetRow> {
    let tokens_per_s = fleet.goal.rate * inputs.workload.mean_tokens().1;
    plans
        .iter()
        .zip(&fleet.prices)
        .map(|(plan, price)| {
            let found = chosen(plan);
            let at = found.and_then(|(_, f)| f.at_min());
            let usd_per_gpu_hour = price.as_ref().map(|p| p.usd_per_gpu_hour);
            let usd_per_hour = found
                .and_then(|(_, f)| f.replicas)
                .zip(usd_per_gpu_hour)
                .map(|(n, usd)| n as f64 * usd);
            FleetRow {
                gpu: plan.row.gpu.clone(),
                qps: fleet.goal.rate,
                replicas: found.and_then(|(_, f)| f.replicas),
                router: fleet.goal.router.name(),
                max_num_batched_tokens: found.map(|(s, _)| s.max_num_batched_tokens),
                max_num_seqs: found.map(|(s, _)| s.max_num_seqs),
                single_engine_max_qps: found.map(|(s, _)| s.max_qps),
                ttft_p99_ms: at.map(|p| p.point.ttft_p99_ms),
                itl_p99_ms: at.and_then(|p| p.point.itl_p99_ms),
                requests_per_run: at.map(|p| p.requests),
                usd_per_gpu_hour,
                usd_per_hour,
                output_tokens_per_s: tokens_per_s,
                usd_per_million_output_tokens: usd_per_hour
                    .map(|usd| usd / (tokens_per_s * 3600.0) * 1e6),
                price_source: match price {
                    Some(p) => format!("{}, {}", p.source, p.month),
                    None => format!("unpriced: no entry in {}", fleet.prices_file),
                },
                note: found.is_none().then(|| no_fleet_note(plan)),
            }
        })
        .collect()
}

pub fn fleet_table(rows: &[FleetRow]) -> Table {
    let mut t = Table::new(FLEET_COLUMNS);
    for r in rows {
        t.push(vec![
            Cell::text(&r.gpu),
            Cell::num(Some(r.qps)),
            r.replicas.map_or(Cell::Empty, Cell::int),
            Cell::text(r.router),
            r.max_num_batched_tokens.map_or(Cell::Empty, Cell::int),
            r.max_num_seqs.map_or(Cell::Empty, Cell::int),
            Cell::num(r.single_engine_max_qps),
            Cell::num(r.ttft_p99_ms),
            Cell::num(r.itl_p99_ms),
            r.requests_per_run.map_or(Cell::Empty, Cell::int),
            // Prices are listed to the hundredth of a cent.
            r.usd_per_gpu_hour
                .map_or(Cell::Empty, |usd| Cell::text(format!("{usd:.4}"))),
            Cell::num(r.usd_per_hour),
            Cell::num(Some(r.output_tokens_per_s)),
            Cell::num(r.usd_per_million_output_tokens),
            Cell::text(&r.price_source),
            Cell::text(r.note.clone().unwrap_or_default()),
        ]);
    }
    t
}

pub fn search_table(plans: &[GpuPlan]) -> Table {
    let mut t = Table::new(SEARCH_COLUMNS);
    for p in plans {
        for (s, f) in p.results.iter().zip(&p.fleets) {
            let mut row = vec![
                Cell::text(&p.row.gpu),
                Cell::int(s.max_num_batched_tokens),
                Cell::int(s.max_num_seqs),
                Cell::num(Some(s.max_qps)),
                Cell::num(s.saturation_rps),
            ];
            match f {
                None => row.extend([
                    Cell::Empty,
                    Cell::Empty,
                    Cell::Empty,
                    Cell::Empty,
                    Cell::Empty,
                    Cell::Empty,
                    Cell::text("not sized: no rate meets the SLO on one engine"),
                ]),
                Some(f) => {
                    let probes: Vec<String> = f
                        .probes
                        .iter()
                        .map(|p| {
                            let ok = if p.point.meets_slo { "yes" } else { "no" };
                            format!("{}:{ok}", p.replicas)
                        })
                        .collect();
                    let at = f.at_min();
                    row.extend([
                        Cell::int(f.lower_bound),
                        Cell::int(f.first_probe),
                        f.replicas.map_or(Cell::Empty, Cell::int),
                        Cell::text(probes.join(" ")),
                        Cell::num(at.map(|a| a.point.ttft_p99_ms)),
                        Cell::num(at.and_then(|a| a.point.itl_p99_ms)),
                        Cell::text(f.note.clone().unwrap_or_default()),
                    ]);
                }
            }
            t.push(row);
        }
    }
    t
}

/// The fleet line of the figures' subtitle.
pub fn subtitle_line(fleet: &FleetTarget) -> String {
    format!(
        "fleet at {:.3} req/s ({}), {} router, one GPU per replica, list prices from {}",
        fleet.goal.rate,
        fleet.rate_source,
        fleet.goal.router.name(),
        fleet.prices_file
    )
}

/// Cost bars per GPU and p99 latency against replicas at each GPU's
/// chosen setting (the search's probes), the SLO as a target line.
pub fn charts(inputs: &PlanInputs, rows: &[FleetRow], plans: &[GpuPlan]) -> Vec<ChartSpec> {
    let names: Vec<String> = rows
        .iter()
        .map(|r| match r.replicas {
            Some(n) => format!("{} x{n}", r.gpu),
            None => format!("{} (none)", r.gpu),
        })
        .collect();
    let bars = |stem: &str, title: &str, y_label: &str, y: fn(&FleetRow) -> Option<f64>| {
        let points = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i as f64, y(r)?)))
            .collect();
        ChartSpec::new(stem, title, "GPU x replicas", y_label)
            .categories(&names)
            .bars()
            .series("cheapest fleet meeting the SLO", points)
    };
    let slo = &inputs.slo;
    let latency =
        |stem: &str, what: &str, target: f64, y: fn(&FleetSearch, usize) -> Option<f64>| {
            let mut spec = ChartSpec::new(
                stem,
                &format!("{what} p99 vs fleet size, cheapest settings per GPU"),
                "replicas (one GPU each)",
                &format!("{what} p99 (ms)"),
            )
            .y_scale(figures::YScale::Auto)
            .reference(format!("{what} SLO {target} ms (target)"), target);
            for p in plans {
                let Some((s, f)) = chosen(p) else { continue };
                let mut probes: Vec<(f64, f64)> = f
                    .probes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, pr)| Some((pr.replicas as f64, y(f, i)?)))
                    .collect();
                probes.sort_by(|a, b| a.0.total_cmp(&b.0));
                let label = format!(
                    "{} (batched {}, seqs {})",
                    p.row.gpu, s.max_num_batched_tokens, s.max_num_seqs
                );
                spec = spec.series(label, probes);
            }
            spec
        };
    vec![
        bars(
            "fleet_usd_per_hour",
            "Fleet cost per hour at the target rate",
            "list price of the fleet ($ per hour)",
            |r| r.usd_per_hour,
        ),
        bars(
            "fleet_usd_per_million_output_tokens",
            "Fleet cost per million output tokens at the target rate",
            "$ per million output tokens",
            |r| r.usd_per_million_output_tokens,
        ),
        latency("fleet_ttft_p99", "TTFT", slo.ttft_p99_ms, |f, i| {
            Some(f.probes[i].point.ttft_p99_ms)
        }),
        latency("fleet_itl_p99", "ITL", slo.itl_p99_ms, |f, i| {
            f.probes[i].point.itl_p99_ms
        }),
    ]
}

/// The fleet part of `assumptions.txt`.
pub fn assumptions(fleet: &FleetTarget, inputs: &PlanInputs) -> String {
    let prices: Vec<String> = inputs
        .targets
        .iter()
        .zip(&fleet.prices)
        .map(|(t, p)| match p {
            Some(p) => format!(
                "  {}: ${:.4} per GPU-hour ({}, as listed in {})",
                t.cost().gpu.name,
                p.usd_per_gpu_hour,
                p.source,
                p.month
            ),
            None => format!(
                "  {}: no price in the table (sized, not priced)",
                t.cost().gpu.name
            ),
        })
        .collect();
    format!(
        "\nFleet sizing: per GPU, the fewest replicas meeting the SLO at {:.3} req/s ({}), each \
         replica one GPU running one engine of the setting (tensor parallelism is not modelled), \
         requests spread by the {} router. Per setting with a single-engine rate above 0: lower \
         bound floor(rate / saturation_rps) + 1 replicas (fewer cannot keep up), first probe \
         max(lower bound, ceil(rate / max_qps)), then doubling or bisection, each probe a \
         simulated fleet run (a trace whole; a synthetic workload with replicas x \
         requests_per_run requests, at most max_requests = {}); up to max_replicas = {}. The \
         cheapest fleet per GPU has the fewest replicas, then the highest single-engine rate. \
         Cost: replicas x the GPU's list price; $ per million output tokens at the offered \
         load.\nPrices ({}; public on-demand list prices as of the month named, not \
         discounted, reserved or spot rates: edit the file or pass --prices FILE):\n{}\n",
        fleet.goal.rate,
        fleet.rate_source,
        fleet.goal.router.name(),
        inputs.method.max_requests,
        fleet.goal.max_replicas,
        fleet.prices_file,
        prices.join("\n")
    )
}

/// The fleet part of `meta.ron`.
#[derive(Serialize)]
pub struct FleetMeta<'a> {
    qps: f64,
    rate_source: &'a str,
    router: &'static str,
    max_replicas: usize,
    prices_file: &'a str,
    /// The prices found (GPUs without one are left out).
    prices: Vec<&'a GpuPrice>,
    fleets: Vec<FleetRow>,
}

pub fn meta<'a>(inputs: &PlanInputs, fleet: &'a FleetTarget, plans: &[GpuPlan]) -> FleetMeta<'a> {
    FleetMeta {
        qps: fleet.goal.rate,
        rate_source: &fleet.rate_source,
        router: fleet.goal.router.name(),
        max_replicas: fleet.goal.max_replicas,
        prices_file: &fleet.prices_file,
        prices: fleet.priced(),
        fleets: fleet_rows(inputs, fleet, plans),
    }
}

/// Writes the fleet files into `dir`, adding their paths to `files`.
pub fn write_all(
    inputs: &PlanInputs,
    fleet: &FleetTarget,
    plans: &[GpuPlan],
    dir: &Path,
    subtitle: &str,
    files: &mut Vec<PathBuf>,
) -> Result<(), PlanError> {
    let rows = fleet_rows(inputs, fleet, plans);
    write(
        dir.join("fleet_plan.csv"),
        &fleet_table(&rows).to_csv(),
        files,
    )?;
    write(
        dir.join("fleet_search.csv"),
        &search_table(plans).to_csv(),
        files,
    )?;
    let subtitle = format!("{subtitle}\n{}", subtitle_line(fleet));
    for spec in charts(inputs, &rows, plans) {
        let drawn =
            charts::draw(&[(figures::Source::Sim, &spec)], dir, &subtitle).map_err(|e| {
                PlanError::Figure {
                    stem: spec.stem.clone(),
                    message: e.to_string(),
                }
            })?;
        files.extend(drawn);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
