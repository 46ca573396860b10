//! poisson_mix's script (arrivals, lengths, shared prefixes) and its refusal of impossible settings.

use super::*;
use crate::catalogue::default_settings;
use crate::script::WARMUP_TAG;
use statrs::statistics::Statistics;

fn settings(sets: &[&str]) -> Settings {
    let mut s = default_settings(&PoissonMix).unwrap();
    for kv in sets {
        s.set_arg(kv).unwrap();
    }
    s
}

#[test]
fn poisson_arrivals_with_lengths_in_range_and_shared_prefixes() {
    let s = settings(&["rates=20", "requests=400", "skip=40"]);
    let conds = PoissonMix
        .plan(&s, 9, &PromptSource::random_tokens(1000).unwrap())
        .unwrap();
    assert_eq!(conds.len(), 1);
    let reqs = &conds[0].script.requests;
    assert_eq!(reqs.len(), 401);
    assert_eq!(reqs[0].tag, WARMUP_TAG);
    let mut last = 0.0;
    let mut delays = Vec::new();
    for r in &reqs[1..] {
        assert!((64..=3000).contains(&r.prompt.len()), "{}", r.prompt.len());
        assert!((16..=256).contains(&r.max_tokens));
        let Gate::After { deps, delay_s } = &r.gate else {
            panic!("arrivals follow the warm-up")
        };
        assert_eq!(deps, &vec![0]);
        assert!(*delay_s >= last);
        delays.push(delay_s - last);
        last = *delay_s;
    }
    let mean = delays.mean();
    assert!((mean - 0.05).abs() < 0.01, "mean gap {mean} s at 20 req/s");
    assert_eq!(reqs.iter().filter(|r| r.tag == SKIP_TAG).count(), 40);
    let heads: std::collections::HashSet<&[u32]> = reqs[1..]
        .iter()
        .filter(|r| r.prompt.len() > 1024)
        .map(|r| &r.prompt[..1024])
        .collect();
    let long = reqs[1..].iter().filter(|r| r.prompt.len() > 1024).count();
    assert!(heads.len() < long, "some long prompts share a pool prefix");
    assert!(heads.len() > 4, "not all of them do");
    let short = reqs[1..].iter().filter(|r| r.prompt.len() < 300).count();
    assert!(short > long / 2, "log-uniform lengths favour short prompts");
}

#[test]
fn impossible_settings_are_rejected() {
    let too_long = settings(&["prompt_max=4000"]);
    let e = PoissonMix
        .plan(&too_long, 0, &PromptSource::random_tokens(100).unwrap())
        .unwrap_err();
    assert!(e.to_string().contains("max_model_len"), "{e}");
    let e = PoissonMix
        .plan(
            &settings(&["requests=10", "skip=10"]),
            0,
            &PromptSource::random_tokens(100).unwrap(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("skip"), "{e}");
    let e = PoissonMix
        .plan(
            &settings(&["output_min=300"]),
            0,
            &PromptSource::random_tokens(100).unwrap(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("output_max"), "{e}");
}
