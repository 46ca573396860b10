//! The event loop on the virtual clock, driving the real scheduler.

use crate::common;

use common::{config, sim_engine};
use engine::Request;
use sim::workload::{
    ArrivalProcess, ClosedLoop, ClosedLoopConfig, OpenLoop, OpenLoopConfig, PromptLayout,
    PromptSource, RequestMaker, ScriptEntry, Scripted, Trigger,
};
use sim::{run, RunError, RunRecords, VirtualClock, Workload};

fn maker(prompt: usize, output: usize, seed: u64) -> RequestMaker {
    let layout = PromptLayout::Unique { tokens: prompt };
    RequestMaker::new(PromptSource::default(), layout, output, seed).unwrap()
}

fn run_one(workload: &mut dyn Workload) -> RunRecords {
    let mut engines = vec![sim_engine(config())];
    run(&mut engines, &mut VirtualClock::new(), workload).unwrap()
}

fn csv(records: &RunRecords) -> (Vec<u8>, Vec<u8>) {
    let (mut req, mut steps) = (Vec::new(), Vec::new());
    sim::records::write_requests_csv(&mut req, &records.requests).unwrap();
    sim::records::write_steps_csv(&mut steps, &records.steps).unwrap();
    (req, steps)
}

fn poisson(seed: u64) -> OpenLoop {
    let process = ArrivalProcess::Poisson { rate_per_s: 400.0 };
    OpenLoop::new(
        OpenLoopConfig::new(process, 200, seed),
        maker(300, 20, seed),
    )
    .unwrap()
}

#[test]
fn same_seed_gives_byte_identical_csv_and_another_seed_does_not() {
    let a = csv(&run_one(&mut poisson(11)));
    let b = csv(&run_one(&mut poisson(11)));
    assert_eq!(a, b);
    let c = csv(&run_one(&mut poisson(12)));
    assert_ne!(a.0, c.0);
}

#[test]
fn every_request_finishes_with_its_tokens_stamped_at_step_ends() {
    let records = run_one(&mut poisson(3));
    assert_eq!(records.requests.len(), 200);
    let ends: Vec<f64> = records
        .steps
        .iter()
        .map(|s| s.start_s + s.duration_s)
        .collect();
    for r in &records.requests {
        assert_eq!(r.finish_reason, "length");
        assert_eq!(r.output_tokens(), 20);
        assert_eq!(r.finish_s, r.token_times_s.last().copied());
        assert!(r.ttft_s().unwrap() > 0.0);
        assert!(r.token_times_s.iter().all(|t| ends.contains(t)));
    }
    assert_eq!(records.output_tokens(), 200 * 20);
    let scheduled: usize = records.steps.iter().map(|s| s.scheduled_tokens).sum();
    assert_eq!(
        scheduled,
        200 * (300 + 19),
        "each prompt and all but the last output computed once"
    );
    for w in records.steps.windows(2) {
        assert!(
            w[1].start_s >= w[0].start_s + w[0].duration_s - 1e-12,
            "one engine never overlaps itself"
        );
    }
}

#[test]
fn closed_loop_keeps_exactly_c_requests_in_flight() {
    let (clients, total) = (8, 64);
    let mut w = ClosedLoop::new(ClosedLoopConfig::new(clients, total), maker(256, 16, 1)).unwrap();
    let records = run_one(&mut w);
    assert_eq!(records.requests.len(), total);
    // +1 at each arrival, -1 at each finish; a finish and the arrival it
    // triggers share a time, so finishes are applied first.
    let mut events: Vec<(f64, i32)> = Vec::new();
    for r in &records.requests {
        events.push((r.arrival_s, 1));
        events.push((r.finish_s.unwrap(), -1));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let last_arrival = records
        .requests
        .iter()
        .map(|r| r.arrival_s)
        .fold(0.0, f64::max);
    let mut in_flight = 0;
    let mut i = 0;
    while i < events.len() {
        let t = events[i].0;
        while i < events.len() && events[i].0 == t {
            in_flight += events[i].1;
            i += 1;
        }
        assert!(in_flight <= clients as i32);
        if t <= last_arrival {
            assert_eq!(in_flight, clients as i32, "at t = {t}");
        }
    }
    assert_eq!(in_flight, 0);
}

#[test]
fn an_arrival_during_a_step_joins_the_next_step() {
    // Request 0's prefill step takes milliseconds; request 1 arrives 10 µs in.
    let entries = vec![
        ScriptEntry::new(Request::new(0, vec![7; 2000], 4), "long", Trigger::At(0.0)),
        ScriptEntry::new(Request::new(1, vec![9; 32], 4), "late", Trigger::At(1e-5)),
    ];
    let records = run_one(&mut Scripted::new(entries).unwrap());
    let first = &records.steps[0];
    assert!(first.duration_s > 1e-5);
    assert_eq!((first.prefill_seqs, first.decode_seqs), (1, 0));
    let second = &records.steps[1];
    assert_eq!(second.start_s, first.start_s + first.duration_s);
    assert_eq!((second.prefill_seqs, second.decode_seqs), (1, 1));
    // The second step's counts: request 0's decode after its 2,000-token
    // prompt, and request 1's whole 32-token prompt.
    assert_eq!(
        (
            second.scheduled_tokens,
            second.prefill_tokens,
            second.context_tokens,
            second.max_context
        ),
        (33, 32, 2001 + 32, 2001)
    );
    for s in &records.steps {
        let c = s.shape.counts();
        assert_eq!(
            (s.scheduled_tokens, s.prefill_seqs, s.decode_seqs),
            (c.tokens, c.prefill_seqs, c.decode_seqs)
        );
        assert_eq!(
            (s.context_tokens, s.max_context),
            (c.context_tokens, c.max_context)
        );
    }
    let late = records.request(1).unwrap();
    assert_eq!(late.token_times_s[0], second.start_s + second.duration_s);
    assert_eq!(late.arrival_s, 1e-5);
}

/// Request 0 at time 0, request 1 half a second after it finishes; 64-token
/// prompts, 2 output tokens each.
fn two_requests_half_a_second_apart() -> Scripted {
    Scripted::new(vec![
        ScriptEntry::new(Request::new(0, vec![1; 64], 2), "a", Trigger::At(0.0)),
        ScriptEntry::new(
            Request::new(1, vec![2; 64], 2),
            "b",
            Trigger::AfterFinish {
                id: 0,
                delay_s: 0.5,
            },
        ),
    ])
    .unwrap()
}

#[test]
fn an_idle_engine_waits_for_the_next_arrival() {
    let records = run_one(&mut two_requests_half_a_second_apart());
    let a = records.request(0).unwrap();
    let b = records.request(1).unwrap();
    assert_eq!(b.arrival_s, a.finish_s.unwrap() + 0.5);
    let b_first_step = records
        .steps
        .iter()
        .find(|s| s.start_s >= b.arrival_s)
        .unwrap();
    assert_eq!(b_first_step.start_s, b.arrival_s);
}

#[test]
fn shared_prefixes_hit_the_cache_and_cached_tokens_are_recorded() {
    let layout = PromptLayout::SharedPrefix {
        groups: 1,
        prefix_tokens: 512,
        unique_tokens: 32,
    };
    let maker = RequestMaker::new(PromptSource::default(), layout, 4, 5).unwrap();
    let mut w = ClosedLoop::new(ClosedLoopConfig::new(1, 4), maker).unwrap();
    let records = run_one(&mut w);
    assert_eq!(records.requests[0].cached_tokens, 0);
    for r in &records.requests[1..] {
        assert_eq!(r.cached_tokens, 512);
        assert!(r.ttft_s() < records.requests[0].ttft_s());
    }
    assert_eq!(records.prefix_cache_queries, 4 * 544);
    assert_eq!(records.prefix_cache_hits, 3 * 512);
}

#[test]
fn engines_on_a_virtual_clock_run_side_by_side() {
    let make = |engines: usize| {
        let process = ArrivalProcess::Fixed { rate_per_s: 1e6 };
        let mut cfg = OpenLoopConfig::new(process, 64, 0);
        cfg.num_engines = engines;
        OpenLoop::new(cfg, maker(1024, 32, 0)).unwrap()
    };
    let mut one = vec![sim_engine(config())];
    let single = run(&mut one, &mut VirtualClock::new(), &mut make(1)).unwrap();
    let mut two = vec![sim_engine(config()), sim_engine(config())];
    let double = run(&mut two, &mut VirtualClock::new(), &mut make(2)).unwrap();
    let end = |r: &RunRecords| {
        r.requests
            .iter()
            .filter_map(|q| q.finish_s)
            .fold(0.0, f64::max)
    };
    assert!(
        end(&double) < 0.75 * end(&single),
        "{} vs {}",
        end(&double),
        end(&single)
    );
    let first_of = |e: usize| double.steps.iter().find(|s| s.engine == e).unwrap().start_s;
    assert!(first_of(1) < double.steps[0].start_s + double.steps[0].duration_s);
    assert!(double.steps.iter().any(|s| s.engine == 1));
}

#[test]
fn arrivals_for_a_missing_engine_or_with_a_reused_id_fail_the_run() {
    let mut entry = ScriptEntry::new(Request::new(0, vec![1; 8], 1), "x", Trigger::At(0.0));
    entry.engine = 3;
    let mut engines = vec![sim_engine(config())];
    let err = run(
        &mut engines,
        &mut VirtualClock::new(),
        &mut Scripted::new(vec![entry]).unwrap(),
    );
    assert!(matches!(
        err,
        Err(RunError::NoSuchEngine {
            id: 0,
            engine: 3,
            engines: 1
        })
    ));

    struct Twice;
    impl Workload for Twice {
        fn initial(&mut self) -> Vec<sim::Arrival> {
            let a = sim::Arrival {
                request: Request::new(5, vec![1; 8], 1),
                engine: 0,
                tag: String::new(),
            };
            vec![a]
        }
        fn on_finish(&mut self, _id: u64, _now: f64) -> Vec<sim::Arrival> {
            self.initial()
        }
    }
    let mut engines = vec![sim_engine(config())];
    let err = run(&mut engines, &mut VirtualClock::new(), &mut Twice);
    assert!(
        matches!(
            err,
            Err(RunError::Request(engine::RequestError::DuplicateId(_)))
        ),
        "{err:?}"
    );
}

#[test]
fn a_reused_engine_keeps_its_cache_and_counters_cover_one_run() {
    let prompt: Vec<u32> = (0..100).collect();
    let script = |id: u64| {
        let entry = ScriptEntry::new(Request::new(id, prompt.clone(), 2), "p", Trigger::At(0.0));
        Scripted::new(vec![entry]).unwrap()
    };
    let mut engines = vec![sim_engine(config())];
    let mut clock = VirtualClock::new();
    let cold = run(&mut engines, &mut clock, &mut script(0)).unwrap();
    assert_eq!(
        (cold.prefix_cache_queries, cold.prefix_cache_hits),
        (100, 0)
    );
    let warm = run(&mut engines, &mut clock, &mut script(1)).unwrap();
    assert_eq!(
        (warm.prefix_cache_queries, warm.prefix_cache_hits),
        (100, 96)
    );
    assert_eq!(warm.requests[0].cached_tokens, 96);
    assert!(
        warm.steps[0].start_s >= cold.steps.last().unwrap().start_s,
        "time goes on"
    );
}

#[test]
fn an_arrival_time_that_is_not_finite_fails_the_run() {
    let mut request = Request::new(4, vec![1; 8], 1);
    request.arrival_time = f64::NAN;
    struct Once(Option<sim::Arrival>);
    impl Workload for Once {
        fn initial(&mut self) -> Vec<sim::Arrival> {
            self.0.take().into_iter().collect()
        }
        fn on_finish(&mut self, _id: u64, _now: f64) -> Vec<sim::Arrival> {
            Vec::new()
        }
    }
    let arrival = sim::Arrival {
        request,
        engine: 0,
        tag: String::new(),
    };
    let mut engines = vec![sim_engine(config())];
    let err = run(
        &mut engines,
        &mut VirtualClock::new(),
        &mut Once(Some(arrival)),
    );
    assert!(
        matches!(err, Err(RunError::BadArrivalTime { id: 4, .. })),
        "{err:?}"
    );
}

/// Prices every step at 1 ms and keeps the idle time each was priced after.
struct IdleRecorder(std::sync::Mutex<Vec<f64>>);

impl sim::CostModel for IdleRecorder {
    fn step_seconds(&self, _: &engine::BatchShape) -> f64 {
        1e-3
    }
    fn step_seconds_after(
        &self,
        batch: &engine::BatchShape,
        idle_s: f64,
        _history: &mut sim::GpuHistory,
    ) -> f64 {
        self.0.lock().unwrap().push(idle_s);
        self.step_seconds(batch)
    }
}

#[test]
fn the_runner_is_told_how_long_its_engine_sat_idle_before_each_step() {
    let cost = std::sync::Arc::new(IdleRecorder(Default::default()));
    let runner = sim::SimRunner::new(cost.clone(), 1000);
    let mut engines = vec![engine::EngineCore::new(config(), runner).unwrap()];
    run(
        &mut engines,
        &mut VirtualClock::new(),
        &mut two_requests_half_a_second_apart(),
    )
    .unwrap();
    let idle = cost.0.lock().unwrap().clone();
    // Each request: a prefill and one decode, back to back; the second
    // arrives 0.5 s after the first finishes. Before the first step the
    // GPU has rested for ever.
    assert_eq!(idle.len(), 4, "{idle:?}");
    assert_eq!(idle[0], f64::INFINITY);
    assert_eq!((idle[1], idle[3]), (0.0, 0.0));
    assert!((idle[2] - 0.5).abs() < 1e-12, "{idle:?}");
}
