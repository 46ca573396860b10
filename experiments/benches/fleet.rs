//! Fleet simulator speed: replicas of Qwen3-0.6B on the shipped H200
//! profile behind a router, replaying a Poisson stream of requests.
//!
//! Defaults: 16 replicas, 1,000,000 requests at 2,400 requests/s (150 a
//! replica, about 60 % of what one replica serves under a 2 s TTFT p99 at
//! these lengths), prompts of 512 tokens (a 384-token prefix shared by one
//! of 64 groups, then 128 tokens of the request's own), 128 output tokens,
//! default engine settings (SHA-256 block hashes), the prefix-aware router
//! (`lambda` 256) and step shapes not kept. Prints requests, replicas,
//! steps, simulated seconds, the run's wall and CPU seconds (the workload is
//! built before the clock starts), requests and steps per wall second, the
//! prefix-cache hit rate and the peak resident memory.
//!
//! `cargo bench -p experiments --bench fleet` (one thread: the event loop
//! is sequential); `-- --requests N --replicas R --rate Q --router
//! prefix_aware|least_outstanding|round_robin` changes the run.

use engine::{EngineConfig, EngineCore};
use experiments::backend::{cost_for, ProfileLookup};
use sim::cluster::{LeastOutstanding, PrefixCacheAware, RoundRobin, Router};
use sim::workload::{
    ArrivalProcess, OpenLoop, OpenLoopConfig, PromptLayout, PromptSource, RequestMaker,
};
use sim::{run_routed, ModelShape, RunOptions, SimRunner, VirtualClock};
use std::time::Instant;

struct Args {
    requests: usize,
    replicas: usize,
    rate: f64,
    router: String,
}

fn parse_args() -> Args {
    let mut args = Args {
        requests: 1_000_000,
        replicas: 16,
        rate: 2400.0,
        router: "prefix_aware".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--requests" => args.requests = value().parse().expect("--requests N"),
            "--replicas" => args.replicas = value().parse().expect("--replicas R"),
            "--rate" => args.rate = value().parse().expect("--rate Q"),
            "--router" => args.router = value(),
            // cargo bench passes --bench to harness=false targets.
            _ => {}
        }
    }
    args
}

fn router(name: &str) -> Box<dyn Router> {
    match name {
        "prefix_aware" => Box::new(PrefixCacheAware::new(256.0).expect("lambda")),
        "least_outstanding" => Box::new(LeastOutstanding),
        "round_robin" => Box::new(RoundRobin::default()),
        other => panic!("unknown router {other}"),
    }
}

/// CPU time of this thread (Linux), so a busy machine does not inflate the
/// figure as it does the wall time.
fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(nanos * 1e-9)
}

/// Peak resident memory of this process (Linux), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    let args = parse_args();
    let shape = ModelShape::qwen3_0_6b();
    let gpu = calibration::datasheet::lookup("h200-sxm").expect("h200-sxm in the datasheet");
    let cost = cost_for(&shape, &gpu, &ProfileLookup::Shipped).expect("shipped profile");
    let config = EngineConfig::default();
    let blocks = cost.kv_blocks(&config);
    let mut engines: Vec<EngineCore<SimRunner>> = (0..args.replicas)
        .map(|_| {
            let runner = SimRunner::new(cost.model.clone(), blocks);
            EngineCore::new(config.clone(), runner).expect("engine")
        })
        .collect();
    let layout = PromptLayout::SharedPrefix {
        groups: 64,
        prefix_tokens: 384,
        unique_tokens: 128,
    };
    let source = PromptSource::random_tokens(151_936).expect("vocabulary");
    let maker = RequestMaker::new(source, layout, 128, 1).expect("maker");
    let process = ArrivalProcess::Poisson {
        rate_per_s: args.rate,
    };
    let build = Instant::now();
    let mut workload =
        OpenLoop::new(OpenLoopConfig::new(process, args.requests, 2), maker).expect("workload");
    let build_s = build.elapsed().as_secs_f64();
    let options = RunOptions {
        record_step_shapes: false,
    };
    let mut router = router(&args.router);
    let (start, cpu_start) = (Instant::now(), cpu_seconds());
    let run = run_routed(
        &mut engines,
        &mut VirtualClock::new(),
        &mut workload,
        router.as_mut(),
        &options,
    )
    .expect("run");
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds()
        .zip(cpu_start)
        .map_or(f64::NAN, |(end, start)| end - start);
    let records = &run.records;
    let simulated = records
        .requests
        .iter()
        .filter_map(|r| r.finish_s)
        .fold(0.0, f64::max);
    let hit_pct = 100.0 * records.prefix_cache_hits as f64 / records.prefix_cache_queries as f64;
    println!(
        "fleet bench: {} replicas of qwen3-0.6b on h200-sxm ({}), router {}, Poisson {} req/s, \
         512-token prompts (384 shared by one of 64 groups), 128 outputs",
        args.replicas, cost.description, args.router, args.rate
    );
    println!(
        "requests {}, steps {}, simulated {simulated:.1} s, workload built in {build_s:.2} s, \
         run {wall:.2} s wall ({cpu:.2} s CPU), {:.0} requests/s, {:.0} steps/s, prefix-cache hits {hit_pct:.1} %, \
         peak RSS {:.0} MiB",
        records.requests.len(),
        records.steps.len(),
        records.requests.len() as f64 / wall,
        records.steps.len() as f64 / wall,
        peak_rss_mib().unwrap_or(f64::NAN),
    );
}
