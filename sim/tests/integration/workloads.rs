//! Arrival patterns and request contents of the workloads.

use sim::workload::{
    ArrivalProcess, ClosedLoop, ClosedLoopConfig, OpenLoop, OpenLoopConfig, PromptLayout,
    PromptSource, RequestMaker, Tenants, WorkloadError,
};
use sim::Workload;

fn maker(seed: u64) -> RequestMaker {
    RequestMaker::new(
        PromptSource::default(),
        PromptLayout::Unique { tokens: 8 },
        2,
        seed,
    )
    .unwrap()
}

fn times(w: &mut OpenLoop) -> Vec<f64> {
    w.initial().iter().map(|a| a.request.arrival_time).collect()
}

#[test]
fn poisson_arrivals_have_the_asked_mean_rate() {
    let rate = 50.0;
    let n = 20_000;
    let process = ArrivalProcess::Poisson { rate_per_s: rate };
    let t = times(&mut OpenLoop::new(OpenLoopConfig::new(process, n, 9), maker(0)).unwrap());
    assert!(t.windows(2).all(|w| w[1] >= w[0]));
    // The mean gap of 20,000 exponential gaps has a relative spread of 0.7 %.
    let measured = n as f64 / t[n - 1];
    assert!((measured / rate - 1.0).abs() < 0.03, "rate {measured}");
    // Exponential gaps: about 1 - 1/e of them are shorter than the mean.
    let short = t.windows(2).filter(|w| w[1] - w[0] < 1.0 / rate).count() as f64 / n as f64;
    assert!((short - 0.632).abs() < 0.02, "{short}");
}

#[test]
fn fixed_rate_arrivals_are_evenly_spaced_and_seeds_reproduce() {
    let mut cfg = OpenLoopConfig::new(ArrivalProcess::Fixed { rate_per_s: 4.0 }, 5, 1);
    cfg.start_s = 1.0;
    let t = times(&mut OpenLoop::new(cfg, maker(0)).unwrap());
    assert_eq!(t, vec![1.0, 1.25, 1.5, 1.75, 2.0]);
    let poisson = |seed| {
        let cfg = OpenLoopConfig::new(ArrivalProcess::Poisson { rate_per_s: 4.0 }, 50, seed);
        let mut w = OpenLoop::new(cfg, maker(seed)).unwrap();
        w.initial()
    };
    assert_eq!(poisson(3), poisson(3));
    assert_ne!(poisson(3), poisson(4));
}

#[test]
fn open_loop_rejects_a_bad_rate() {
    for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let cfg = OpenLoopConfig::new(ArrivalProcess::Poisson { rate_per_s: rate }, 5, 0);
        let err = OpenLoop::new(cfg, maker(0)).unwrap_err();
        assert!(
            matches!(
                err,
                WorkloadError::Invalid {
                    setting: "rate_per_s",
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[test]
fn closed_loop_sends_the_next_request_of_the_finishing_client_after_think_time() {
    let mut cfg = ClosedLoopConfig::new(3, 5);
    cfg.think_time_s = 0.1;
    cfg.num_engines = 2;
    cfg.first_id = 100;
    let mut w = ClosedLoop::new(cfg, maker(0)).unwrap();
    let first = w.initial();
    let ids: Vec<u64> = first.iter().map(|a| a.request.id.0).collect();
    assert_eq!(ids, vec![100, 101, 102]);
    assert_eq!(first[2].engine, 0, "client 2 of 2 engines");
    assert_eq!(first[1].tag, "client1");
    let next = w.on_finish(101, 2.0);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].request.id.0, 103);
    assert_eq!(next[0].request.arrival_time, 2.1);
    assert_eq!(next[0].tag, "client1");
    assert!(w.on_finish(7, 2.0).is_empty(), "not one of its ids");
    assert_eq!(w.on_finish(100, 3.0).len(), 1);
    assert!(w.on_finish(102, 3.0).is_empty(), "all 5 sent");
    assert!(ClosedLoop::new(ClosedLoopConfig::new(0, 5), maker(0)).is_err());
}

#[test]
fn tenants_and_groups_show_in_tags_and_salts() {
    let layout = PromptLayout::SharedPrefix {
        groups: 2,
        prefix_tokens: 16,
        unique_tokens: 4,
    };
    let maker = RequestMaker::new(PromptSource::default(), layout, 1, 0)
        .unwrap()
        .with_tenants(Tenants {
            tenants: 2,
            salted: true,
        })
        .unwrap();
    let mut w = ClosedLoop::new(ClosedLoopConfig::new(2, 2), maker).unwrap();
    let a = w.initial();
    assert_eq!(a[1].tag, "client1/g1/t1");
    assert_eq!(a[1].request.cache_salt.as_deref(), Some("tenant-1"));
    assert_eq!(a[0].request.prompt_token_ids.len(), 20);
}
