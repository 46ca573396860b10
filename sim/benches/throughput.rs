//! Simulator speed: a 64-client closed loop (256 prompt tokens in, 128 out)
//! on the H200 roofline of Qwen3-0.6B, with 10,000 and 1,000,000 requests.
//!
//! Prints simulated steps per wall second and simulated seconds per wall
//! second, then where the time goes: the engine alone (the same closed loop
//! driven without the event loop or records), the cost model, and the rest
//! (event loop, records, workload). `cargo bench -p sim --bench throughput`;
//! pass `quick` after `--` to skip the million-request run, `profile` for
//! one 300,000-request run alone.

use engine::{EngineConfig, EngineCore, HashAlgo, Request};
use sim::workload::{ClosedLoop, ClosedLoopConfig, PromptLayout, PromptSource, RequestMaker};
use sim::{
    run_with, CostModel, GpuSpec, ModelShape, RooflineModel, RunOptions, SimRunner, VirtualClock,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const CLIENTS: usize = 64;
const PROMPT: usize = 256;
const OUTPUT: usize = 128;

fn h200() -> GpuSpec {
    GpuSpec {
        name: "h200-sxm".to_string(),
        bf16_flops: 989e12,
        mem_bandwidth: 4.8e12,
        mem_bytes: 141e9,
        sm_count: 132,
        source: "bench literal".to_string(),
    }
}

/// The roofline, timing its own calls.
struct TimedCost {
    inner: RooflineModel,
    nanos: AtomicU64,
}

impl CostModel for TimedCost {
    fn step_seconds(&self, batch: &engine::BatchShape) -> f64 {
        let t = Instant::now();
        let s = self.inner.step_seconds(batch);
        self.nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        s
    }
}

/// CPU time of this thread (Linux), so a busy machine does not inflate the
/// figures; wall time where the kernel does not say.
fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(nanos * 1e-9)
}

/// Times `f` in CPU seconds (wall seconds if unavailable).
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    let out = f();
    let wall = wall0.elapsed().as_secs_f64();
    let cpu = match (cpu0, cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => wall,
    };
    (out, cpu, wall)
}

fn engine(config: &EngineConfig, cost: Arc<dyn CostModel>, blocks: usize) -> EngineCore<SimRunner> {
    EngineCore::new(config.clone(), SimRunner::new(cost, blocks)).expect("valid engine")
}

fn workload(requests: usize) -> ClosedLoop {
    let layout = PromptLayout::Unique { tokens: PROMPT };
    let maker = RequestMaker::new(PromptSource::default(), layout, OUTPUT, 0).expect("maker");
    ClosedLoop::new(ClosedLoopConfig::new(CLIENTS, requests), maker).expect("workload")
}

fn full_run(config: &EngineConfig, requests: usize, options: &RunOptions) {
    let roofline = RooflineModel::new(h200(), ModelShape::qwen3_0_6b());
    let blocks = roofline.kv_cache_blocks(config);
    let mut engines = vec![engine(config, Arc::new(roofline), blocks)];
    let mut w = workload(requests);
    let (records, cpu, wall) =
        timed(|| run_with(&mut engines, &mut VirtualClock::new(), &mut w, options).expect("run"));
    let simulated = records
        .requests
        .iter()
        .filter_map(|r| r.finish_s)
        .fold(0.0, f64::max);
    let steps = records.steps.len();
    println!(
        "{requests:>9} requests, hash {:?}, step shapes kept {:5}: {cpu:7.3} s CPU ({wall:.3} s wall), \
         {steps:>8} steps, {:>7.0} steps/s, {:>6.1} simulated s per s ({simulated:.1} s simulated)",
        config.prefix_caching_hash_algo,
        options.record_step_shapes,
        steps as f64 / cpu,
        simulated / cpu,
    );
}

/// The same closed loop driven straight through the engine: no event loop,
/// no records, prompts made up front. Splits engine and cost-model time.
fn engine_only(config: &EngineConfig, requests: usize) {
    let roofline = RooflineModel::new(h200(), ModelShape::qwen3_0_6b());
    let blocks = roofline.kv_cache_blocks(config);
    let cost = Arc::new(TimedCost {
        inner: roofline,
        nanos: AtomicU64::new(0),
    });
    let mut e = engine(config, cost.clone(), blocks);
    let prompts: Vec<Vec<u32>> = {
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(0);
        let source = PromptSource::default();
        (0..CLIENTS)
            .map(|_| source.make(&mut rng, PROMPT))
            .collect()
    };
    let mut sent = 0;
    let send = |e: &mut EngineCore<SimRunner>, sent: &mut usize| {
        // Distinct prompts per request: rotate a client prompt by the id.
        let mut p = prompts[*sent % CLIENTS].clone();
        p[0] = (*sent % 151_000) as u32;
        p[1] = (*sent / 151_000) as u32;
        e.add_request(Request::new(*sent as u64, p, OUTPUT))
            .expect("request");
        *sent += 1;
    };
    for _ in 0..CLIENTS.min(requests) {
        send(&mut e, &mut sent);
    }
    let (steps, cpu, wall) = timed(|| {
        let mut steps = 0usize;
        while e.has_unfinished() {
            let out = e.step().expect("step");
            steps += 1;
            for _ in &out.finished {
                if sent < requests {
                    send(&mut e, &mut sent);
                }
            }
        }
        steps
    });
    let cost_s = cost.nanos.load(Ordering::Relaxed) as f64 * 1e-9;
    println!(
        "{requests:>9} requests, engine only, hash {:?}: {cpu:7.3} s CPU ({wall:.3} s wall), \
         {steps} steps, {:.0} steps/s; cost model {:.2} us/step, engine {:.2} us/step",
        config.prefix_caching_hash_algo,
        steps as f64 / cpu,
        cost_s / steps as f64 * 1e6,
        (cpu - cost_s) / steps as f64 * 1e6,
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let xxhash = EngineConfig {
        prefix_caching_hash_algo: HashAlgo::Xxhash,
        ..EngineConfig::default()
    };
    let sha = EngineConfig::default();
    let keep = RunOptions::default();
    let drop_shapes = RunOptions {
        record_step_shapes: false,
    };
    if std::env::args().any(|a| a == "profile") {
        // One long full run, for `perf record`.
        full_run(&xxhash, 300_000, &drop_shapes);
        return;
    }
    println!("closed loop: {CLIENTS} clients, {PROMPT} tokens in / {OUTPUT} out, Qwen3-0.6B on the H200 roofline");
    full_run(&xxhash, 10_000, &keep);
    full_run(&sha, 10_000, &keep);
    engine_only(&xxhash, 10_000);
    engine_only(&sha, 10_000);
    if !quick {
        full_run(&xxhash, 1_000_000, &keep);
        full_run(&xxhash, 1_000_000, &drop_shapes);
        full_run(&sha, 1_000_000, &drop_shapes);
        engine_only(&xxhash, 1_000_000);
    }
}
