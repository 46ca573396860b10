//! `exp calibrate --endpoint URL`: a cost profile from probe loads on a
//! server seen from outside.
//!
//! Contract: every probe ([`probes`]) is a small script played by the
//! endpoint backend (one at a time, each in its own salt namespace so
//! nothing hits a previous probe's cache), and yields one grid point (a
//! step's batch shape and its time, from gaps between a stream's tokens so
//! that no HTTP round trip is in it) for `calibration::fit`, the same fit a
//! measured grid gets; a probe run several times gives the median of its
//! runs' times.
//!
//! The profile's provenance names the endpoint, the probes and the
//! held-out error; its GPU is `--gpu` (default h200-sxm), the datasheet a
//! transfer would start from, and its model shape `--model`'s. Its
//! `.samples.csv` reads back as probe points ([`samples_from_csv`]), so
//! `exp calibrate --refit` fits them again without the server.

mod probes;
mod saved;

pub use probes::{probes, sample, script, Probe, ASSUMED_BUDGET, REPEATS};
pub use saved::{samples_from_csv, SavedSamplesError, PACE_CONTEXT};

use crate::backend::{Backend, EndpointBackend, EndpointSpec, LoadedModel, ModelChoice};
use crate::calibrate::{write_fit, CalibrateArgs, ENDPOINT_DEVICE};
use crate::output::git_commit;
use anyhow::{bail, Context};
use calibration::{fit, Provenance, Sample};
use engine::date::utc_now;
use engine::EngineConfig;
use indicatif::ProgressBar;
use sim::workload::PromptSource;
use sim::ModelShape;

/// Runs every probe against `backend`; `bar` counts probes.
pub fn measure(
    backend: &EndpointBackend,
    seed: u64,
    bar: &ProgressBar,
) -> anyhow::Result<Vec<Sample>> {
    let prompts = PromptSource::random_tokens(backend.vocab())
        .map_err(|e| anyhow::anyhow!("prompts: {e}"))?;
    let engine = EngineConfig::default();
    let all = probes();
    bar.set_length(all.len() as u64);
    // Runs of one probe, in the order probes first ran.
    let mut runs: Vec<(Probe, Vec<Sample>)> = Vec::new();
    let mut missed = Vec::new();
    for (i, probe) in all.into_iter().enumerate() {
        let script = script(probe, crate::script::condition_seed(seed, i), &prompts);
        let records = backend
            .run(&engine, &script)
            .with_context(|| format!("probe {probe:?}"))?;
        match sample(probe, &records) {
            Some(s) => match runs.iter_mut().find(|(p, _)| *p == probe) {
                Some((_, same)) => same.push(s),
                None => runs.push((probe, vec![s])),
            },
            None => missed.push(format!("{probe:?}")),
        }
        bar.inc(1);
    }
    let samples: Vec<Sample> = runs
        .into_iter()
        .filter_map(|(_, s)| median_run(s))
        .collect();
    let needed = 2 * calibration::features::NUM_FEATURES;
    if samples.len() < needed {
        bail!(
            "{} of the probes gave a grid point, the fit needs {needed}; these gave none \
             (a decode probe whose requests never all decoded at once: a KV cache too small \
             for them, or a server max_num_seqs below their concurrency; a prefill the \
             pace request did not decode beside: a max_num_seqs of 1, or a token budget \
             under {ASSUMED_BUDGET}): {}",
            samples.len(),
            missed.join(", ")
        );
    }
    Ok(samples)
}

/// The run of median time among runs of one probe (same shape, up to the
/// context the pace had reached).
fn median_run(mut runs: Vec<Sample>) -> Option<Sample> {
    runs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    let mid = runs.len() / 2;
    runs.into_iter().nth(mid)
}

/// `exp calibrate --endpoint URL --out P.ron`.
pub fn run(args: &CalibrateArgs, url: &str) -> anyhow::Result<()> {
    if args.refit.is_some() || args.runner.backend.is_some() || args.runner.sm_count.is_some() {
        bail!(
            "--endpoint {url} probes a server: leave out --refit, --backend and --sm-count, \
             which are for a runner in this process"
        );
    }
    let model = LoadedModel::config_only(&ModelChoice::parse(&args.runner.model)?)?;
    let spec = EndpointSpec {
        url: url.to_string(),
        model_name: args.model_name.clone(),
    };
    let backend = EndpointBackend::connect(&spec, &model)?;
    let gpu_name = args
        .gpu
        .clone()
        .unwrap_or_else(|| crate::backend::DEFAULT_GPU.into());
    let gpu =
        calibration::datasheet::lookup(&gpu_name).with_context(|| format!("--gpu {gpu_name}"))?;
    let bar = crate::progress::conditions_bar(args.quiet, "calibrate");
    let samples = measure(&backend, 0, &bar)?;
    bar.finish_and_clear();
    let provenance = Provenance {
        device: format!("{ENDPOINT_DEVICE}{}", backend.url()),
        model: backend.model_name().to_string(),
        engine_commit: git_commit(),
        date: utc_now(),
        method: "black-box: endpoint probes (decode ITL over concurrency and context; \
                 prefill over prompt length and cached prefix, timed by the gap it makes in a \
                 decoding stream), timed on the client"
            .into(),
        samples: 0,
        holdout_error_pct_median: f64::NAN,
        holdout_error_pct_p90: f64::NAN,
    };
    let fitted = fit(
        &samples,
        gpu,
        ModelShape::from_qwen3(&model.config),
        provenance,
    )?;
    if !args.quiet {
        let p = &fitted.profile.provenance;
        eprintln!(
            "{} probe points from {}; held-out error median {:.1} %, p90 {:.1} %",
            p.samples, p.device, p.holdout_error_pct_median, p.holdout_error_pct_p90
        );
    }
    write_fit(&args.out, &samples, &fitted.profile)
}
