//! Turns `exp plan`'s arguments into checked inputs, before anything runs.
//!
//! Contract: every user input (GPU names or file, model, profile, workload,
//! SLO, `--set` and `--cb-set` settings) is read and validated here, so bad
//! input fails at once naming the problem instead of after a long search.
//! The profile comes from `--profile FILE`, else the first of the model's
//! shape in `--profiles-dir DIR`, else the first built into `exp`
//! ([`crate::backend::shipped`]), else none (the roofline).

use super::error::PlanError;
use super::fleet_size::FleetGoal;
use super::gpus;
use super::prices::{GpuPrice, PriceTable};
use super::search::SearchMethod;
use super::slo::Slo;
use super::workload::PlanWorkload;
use super::PlanArgs;
use crate::backend::{
    cost_for, operator_cost, CostBasis, LoadedModel, ModelChoice, ProfileLookup, SimBackend,
};
use crate::catalogue;
use crate::fleet::{RouterChoice, ROUTER_NAMES};
use crate::settings::{ParamKind, ParamSpec, Settings};
use engine::EngineConfig;
use sim::ModelShape;
use std::path::{Path, PathBuf};

/// Plan parameters (`--set key=value`, next to the engine options).
pub const PLAN_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "max_num_batched_tokens",
        kind: ParamKind::CountList,
        default: "512,1024,2048,4096,8192",
        help: "max_num_batched_tokens values searched",
    },
    ParamSpec {
        key: "max_num_seqs",
        kind: ParamKind::CountList,
        default: "16,32,64,128,256",
        help: "max_num_seqs values searched",
    },
    ParamSpec {
        key: "requests",
        kind: ParamKind::Count,
        default: "1000",
        help: "requests per run of the first search; runs double until the rate settles (.ron workloads)",
    },
    ParamSpec {
        key: "max_requests",
        kind: ParamKind::Count,
        default: "32000",
        help: "longest run the steady-state growth may reach (.ron workloads)",
    },
    ParamSpec {
        key: "warmup_pct",
        kind: ParamKind::Number,
        default: "10",
        help: "percent of requests (by arrival) left out of the percentiles",
    },
    ParamSpec {
        key: "precision_pct",
        kind: ParamKind::Number,
        default: "2",
        help: "bisection stops when passing and failing rates are this close",
    },
    ParamSpec {
        key: "qps",
        kind: ParamKind::Number,
        default: "0",
        help: "request rate (req/s) to size a fleet for; left out: no fleet (with --trace: the trace's own rate)",
    },
    ParamSpec {
        key: "rate_scale",
        kind: ParamKind::Positive,
        default: "1",
        help: "with --trace: size the fleet for the trace's own rate times this",
    },
    ParamSpec {
        key: "max_replicas",
        kind: ParamKind::Count,
        default: "128",
        help: "largest fleet the sizing tries per GPU and setting",
    },
    ParamSpec {
        key: "router_load_weight",
        kind: ParamKind::Number,
        default: "256",
        help: "--router prefix_aware's load weight: cached tokens one outstanding request is worth",
    },
];

/// What a fleet is sized for (`--set qps=`, or `--trace` at its own rate).
#[derive(Debug, Clone)]
pub struct FleetTarget {
    pub goal: FleetGoal,
    /// How the rate was chosen, in words.
    pub rate_source: String,
    /// One price per target GPU, in the targets' order; `None` for a GPU
    /// that `--gpu all` brought in and the table has no price for (its
    /// fleet is sized, not priced).
    pub prices: Vec<Option<GpuPrice>>,
    pub prices_file: String,
}

impl FleetTarget {
    /// The prices found, in the targets' order.
    pub fn priced(&self) -> Vec<&GpuPrice> {
        self.prices.iter().flatten().collect()
    }

    /// One warning line per GPU without a price.
    pub fn unpriced_warnings(&self, targets: &[crate::backend::SimBackend]) -> Vec<String> {
        targets
            .iter()
            .zip(&self.prices)
            .filter(|(_, p)| p.is_none())
            .map(|(t, _)| {
                format!(
                    "warning: no list price for GPU {} in {}: its fleet is sized but not priced \
                     (fleet_plan.csv: price_source `unpriced`); add an entry to price it",
                    t.cost().gpu.name,
                    self.prices_file
                )
            })
            .collect()
    }
}

/// Everything a plan needs, checked.
pub struct PlanInputs {
    /// One sim backend per target GPU, in the order asked.
    pub targets: Vec<SimBackend>,
    pub model_name: String,
    pub engine: EngineConfig,
    pub batched_tokens: Vec<usize>,
    pub num_seqs: Vec<usize>,
    pub method: SearchMethod,
    pub slo: Slo,
    pub workload: PlanWorkload,
    /// cb_sweep's settings: its defaults, the plan's engine options, `--cb-set`.
    pub cb_settings: Settings,
    /// The calibrated profile pricing the steps, when one does: its path,
    /// or `shipped:<file name>` for one built into `exp`.
    pub profile: Option<String>,
    pub out: PathBuf,
    pub quiet: bool,
    /// `date_utc` of every `meta.ron` the plan writes: when it started, or
    /// `SOURCE_DATE_EPOCH` ([`engine::date::output_date`]); a merge carries
    /// its shards' ([`super::merge`]).
    pub date_utc: String,
    /// Fleet sizing, when a rate to size for was given.
    pub fleet: Option<FleetTarget>,
}

fn bad_param(key: &str, value: f64, expected: &str) -> PlanError {
    PlanError::Settings(crate::settings::SettingsError::BadValue {
        key: key.into(),
        value: value.to_string(),
        expected: expected.into(),
    })
}

pub fn read(args: &PlanArgs) -> Result<PlanInputs, PlanError> {
    let slo = match &args.slo {
        Some(text) => Slo::parse(text)?,
        None => Slo::default(),
    };
    let gpus = gpus::select(args.gpu.as_deref(), args.gpu_file.as_deref())?;
    let model = LoadedModel::config_only(&ModelChoice::parse(&args.model)?)?;
    let shape = ModelShape::from_qwen3(&model.config);

    let mut settings = Settings::new(PLAN_PARAMS)?;
    for arg in &args.set {
        settings.set_arg(arg)?;
    }
    let engine = settings.engine.clone();
    let batched_tokens = settings.counts("max_num_batched_tokens")?;
    let num_seqs = settings.counts("max_num_seqs")?;
    // Options that hold for the whole grid (memory fraction, block size, ...)
    // fail here; a grid point that is invalid on its own is reported per point.
    let mut widest = engine.clone();
    widest.max_num_batched_tokens = batched_tokens.iter().copied().max().unwrap_or(1);
    widest.max_num_seqs = num_seqs.iter().copied().min().unwrap_or(1);
    widest.validate()?;
    let requests = settings.count("requests")?;
    if requests == 0 {
        return Err(bad_param("requests", 0.0, "at least 1"));
    }
    let max_requests = settings.count("max_requests")?;
    if max_requests < requests {
        return Err(bad_param(
            "max_requests",
            max_requests as f64,
            &format!("at least requests = {requests}"),
        ));
    }
    let warmup_pct = settings.number("warmup_pct")?;
    if !(0.0..100.0).contains(&warmup_pct) {
        return Err(bad_param(
            "warmup_pct",
            warmup_pct,
            "a percentage from 0 to below 100",
        ));
    }
    let precision_pct = settings.number("precision_pct")?;
    if precision_pct <= 0.0 {
        return Err(bad_param(
            "precision_pct",
            precision_pct,
            "a positive percentage",
        ));
    }

    let cb = catalogue::find("cb_sweep").ok_or(PlanError::MissingExperiment("cb_sweep"))?;
    let mut cb_settings = catalogue::default_settings(cb)?;
    cb_settings.engine = engine.clone();
    for arg in &args.cb_set {
        cb_settings.set_arg(arg)?;
    }

    let workload = match (&args.workload, &args.trace) {
        (Some(path), _) => PlanWorkload::load(path)?,
        (None, Some(path)) => {
            let w = PlanWorkload::load(path)?;
            if !w.is_trace() {
                return Err(PlanError::Fleet(format!(
                    "--trace {}: give a .csv/.jsonl trace (a .ron workload goes to --workload, \
                     with --set qps=..)",
                    path.display()
                )));
            }
            w
        }
        (None, None) => PlanWorkload::default(),
    };
    workload.check_fits(engine.max_model_len)?;

    let lookup = match (&args.profile, &args.profiles_dir) {
        (Some(file), _) => ProfileLookup::File(file.clone()),
        (None, Some(dir)) => ProfileLookup::Folder(dir.clone()),
        (None, None) => ProfileLookup::Shipped,
    };
    let operators = args
        .cost_model
        .is_operators(args.operator_profile.as_deref());
    let conflicting = args.profile.as_ref().or(args.profiles_dir.as_ref());
    let targets = gpus
        .iter()
        .map(|gpu| {
            let cost = if operators {
                operator_cost(
                    &shape,
                    gpu,
                    args.operator_profile.as_deref(),
                    conflicting.map(|p| p.as_path()),
                )?
            } else {
                cost_for(&shape, gpu, &lookup)?
            };
            Ok(SimBackend::new(cost, &model, None))
        })
        .collect::<Result<Vec<_>, PlanError>>()?;
    let fleet = fleet_target(args, &settings, &workload, &targets)?;
    // The lookup finds one profile for the model (or none) for every GPU.
    let profile = targets.iter().find_map(|t| match &t.cost().basis {
        CostBasis::Profile { source, .. } | CostBasis::Operators { source } => Some(source.clone()),
        CostBasis::Roofline => None,
    });
    Ok(PlanInputs {
        targets,
        model_name: args.model.clone(),
        engine,
        batched_tokens,
        num_seqs,
        method: SearchMethod {
            requests,
            max_requests,
            warmup_pct,
            precision_pct,
            seed: args.seed,
        },
        slo,
        workload,
        cb_settings,
        profile,
        out: args.out.clone(),
        quiet: args.quiet,
        date_utc: engine::date::output_date()?,
        fleet,
    })
}

/// Whether `--set key=...` was given.
fn given(args: &PlanArgs, key: &str) -> bool {
    args.set
        .iter()
        .any(|a| a.split_once('=').is_some_and(|(k, _)| k.trim() == key))
}

/// The fleet to size, if any (see the module docs of `super`).
fn fleet_target(
    args: &PlanArgs,
    settings: &Settings,
    workload: &PlanWorkload,
    targets: &[SimBackend],
) -> Result<Option<FleetTarget>, PlanError> {
    let fail = |m: &str| Err(PlanError::Fleet(m.to_string()));
    let qps = given(args, "qps")
        .then(|| settings.number("qps"))
        .transpose()?;
    let scaled = given(args, "rate_scale");
    let rate_scale = settings.number("rate_scale")?;
    if qps.is_some_and(|q| q <= 0.0) {
        return fail("qps must be a rate above 0 requests per second (leave it out for the single-engine plan)");
    }
    if qps.is_some() && scaled {
        return fail(
            "give qps=.. or rate_scale=.., not both: qps sets the rate, rate_scale scales a \
             --trace's own rate",
        );
    }
    let (rate, rate_source) = match (args.trace.as_ref(), qps) {
        (_, Some(q)) => (q, format!("qps={q} req/s")),
        (Some(_), None) => match workload {
            PlanWorkload::Trace { natural_rate, .. } => (
                natural_rate * rate_scale,
                format!("the trace's own rate {natural_rate:.4} req/s x rate_scale {rate_scale}"),
            ),
            PlanWorkload::Synthetic { .. } => return fail("--trace needs a trace file"),
        },
        (None, None) => {
            if scaled {
                return fail(
                    "rate_scale scales a trace's own rate: give --trace FILE, or --set qps=..",
                );
            }
            if args.router.is_some() || args.prices.is_some() {
                return fail("--router and --prices apply to a sized fleet: give --set qps=Q or --trace FILE");
            }
            return Ok(None);
        }
    };
    let load_weight = settings.number("router_load_weight")?;
    let name = args.router.as_deref().unwrap_or("least_outstanding");
    let router = RouterChoice::from_name(name, load_weight).ok_or_else(|| {
        PlanError::Fleet(format!(
            "--router {name}: unknown router; known: {}",
            ROUTER_NAMES.join(", ")
        ))
    })?;
    router
        .build()
        .map_err(|e| PlanError::Fleet(format!("--router {name}: {e}")))?;
    let max_replicas = settings.count("max_replicas")?;
    if max_replicas == 0 {
        return Err(bad_param("max_replicas", 0.0, "at least 1"));
    }
    let table = match &args.prices {
        Some(path) => PriceTable::load(path)?,
        None => PriceTable::default_table()?,
    };
    // `--gpu all` asks for every GPU the datasheet has, priced or not; a GPU
    // named on purpose must have a price.
    let every_gpu = args.gpu.as_deref().map(str::trim) == Some("all");
    let prices = targets
        .iter()
        .map(|t| {
            let gpu = &t.cost().gpu.name;
            match table.price_of(gpu) {
                Ok(price) => Ok(Some(price.clone())),
                Err(_) if every_gpu => Ok(None),
                Err(e) => Err(e),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(Some(FleetTarget {
        goal: FleetGoal {
            rate,
            router,
            max_replicas,
        },
        rate_source,
        prices,
        prices_file: table.file,
    }))
}

/// File-system-safe folder name for a GPU.
pub fn dir_name(gpu: &str) -> String {
    gpu.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `dir/<gpu>` for per-GPU outputs.
pub fn gpu_dir(dir: &Path, gpu: &str) -> PathBuf {
    dir.join(dir_name(gpu))
}
