//! Which engine options of a condition reach a server, and how.
//!
//! Contract: a server's engine options are its own, fixed when it started.
//! Two of them a client can reproduce, and the endpoint backend does:
//!
//! - `max_num_seqs`: at most that many requests in flight from the client;
//!   a request due while the cap is full waits in the client, FIFO, and its
//!   TTFT counts the wait (from the time the script says it arrives), as it
//!   would count the wait in the engine's queue. This reproduces the engine
//!   setting when the server's own `max_num_seqs` is at least as large.
//! - `enable_prefix_caching = false`: every request gets a cache salt of its
//!   own, so none can hit another's blocks.
//!
//! Every other option ([`check_conditions`]) must be the same in all of a
//! run's conditions: an experiment that sweeps one (chunk_sweep's
//! `max_num_batched_tokens`) is refused, naming the option. A value set
//! with `--set` then describes the server to the sim twin of `--mode both`.
//!
//! Salts ([`Salts`]): a server keeps its prefix cache between runs and
//! between conditions, where each simulated condition starts with an empty
//! engine. So every request's `cache_salt` starts with a namespace unique
//! to the run and the condition; the script's own salts (tenants) follow
//! it, so requests share blocks exactly when they would in one fresh engine.

use super::error::EndpointError;
use crate::catalogue::Condition;
use engine::EngineConfig;
use serde_json::Value;
use std::collections::BTreeSet;

/// Options the client reproduces itself; the rest are the server's.
const REPRODUCED: &[&str] = &["max_num_seqs", "enable_prefix_caching"];

/// How one condition's requests are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Requests in flight at most (`max_num_seqs`).
    pub max_in_flight: usize,
    /// `enable_prefix_caching`; off: a salt per request.
    pub caching: bool,
}

impl Policy {
    pub fn of(engine: &EngineConfig) -> Self {
        Self {
            max_in_flight: engine.max_num_seqs.max(1),
            caching: engine.enable_prefix_caching,
        }
    }
}

/// The `cache_salt` of every request of one condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salts {
    namespace: String,
    caching: bool,
}

impl Salts {
    /// `run` is unique to this run of `exp`; `condition` counts the
    /// conditions it has run.
    pub fn new(run: &str, condition: u64, policy: Policy) -> Self {
        Self {
            namespace: format!("servetwin-{run}-c{condition}"),
            caching: policy.caching,
        }
    }

    /// The salt of request `id`, whose script salt is `salt`.
    pub fn of(&self, id: u64, salt: Option<&str>) -> String {
        match (self.caching, salt) {
            (false, _) => format!("{}/uncached/{id}", self.namespace),
            (true, Some(s)) => format!("{}/salt/{s}", self.namespace),
            (true, None) => self.namespace.clone(),
        }
    }
}

/// A token unique to this process and moment, for [`Salts::new`].
pub fn run_token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}", nanos, std::process::id())
}

/// Refuses conditions an endpoint cannot run as planned: a fleet, a sweep
/// over an option the server fixes, or a request longer than the
/// server's `max_model_len` (when it lists one).
pub fn check_conditions(
    conditions: &[Condition],
    url: &str,
    max_model_len: Option<usize>,
) -> Result<(), crate::backend::BackendError> {
    if let Some(fleet) = conditions.iter().find_map(|c| c.fleet) {
        return Err(crate::backend::BackendError::FleetUnsupported {
            backend: "endpoint",
            replicas: fleet.replicas,
            router: fleet.router.name(),
        });
    }
    check_fixed_options(conditions)?;
    let Some(limit) = max_model_len else {
        return Ok(());
    };
    for c in conditions {
        for (id, r) in c.script.requests.iter().enumerate() {
            let needed = r.prompt.len() + r.max_tokens;
            if needed > limit {
                return Err(EndpointError::TooLong {
                    label: c.label.clone(),
                    id: id as u64,
                    needed,
                    prompt: r.prompt.len(),
                    output: r.max_tokens,
                    url: url.to_string(),
                    limit,
                }
                .into());
            }
        }
    }
    Ok(())
}

fn check_fixed_options(conditions: &[Condition]) -> Result<(), EndpointError> {
    let maps: Vec<serde_json::Map<String, Value>> = conditions
        .iter()
        .filter_map(|c| match serde_json::to_value(&c.engine) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        })
        .collect();
    let Some(first) = maps.first() else {
        return Ok(());
    };
    for key in first.keys().filter(|k| !REPRODUCED.contains(&k.as_str())) {
        let values: BTreeSet<String> = maps
            .iter()
            .map(|m| m.get(key).map_or_else(|| "none".into(), Value::to_string))
            .collect();
        if values.len() > 1 {
            return Err(EndpointError::SweepsServerOption {
                option: key.clone(),
                values: values.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{Gate, Script, ScriptedRequest};

    fn condition(engine: EngineConfig, prompt: usize) -> Condition {
        let request = ScriptedRequest {
            tag: "t".into(),
            prompt: vec![1; prompt],
            max_tokens: 4,
            salt: None,
            gate: Gate::At(0.0),
        };
        Condition {
            label: "c".into(),
            engine,
            script: Script {
                requests: vec![request],
            },
            seed: 0,
            fleet: None,
            disagg: None,
        }
    }

    #[test]
    fn reproduced_options_may_vary_and_fixed_ones_may_not() {
        let base = EngineConfig::default();
        let cb_off = EngineConfig {
            max_num_seqs: 1,
            enable_prefix_caching: false,
            ..base.clone()
        };
        let both = [condition(base.clone(), 8), condition(cb_off, 8)];
        check_conditions(&both, "u", Some(64)).unwrap();
        let chunked = EngineConfig {
            max_num_batched_tokens: 512,
            ..base.clone()
        };
        let sweep = [condition(base.clone(), 8), condition(chunked, 8)];
        let err = check_conditions(&sweep, "u", None).unwrap_err().to_string();
        assert!(
            err.contains("max_num_batched_tokens to 2048, 512")
                && err.contains("--set max_num_batched_tokens=VALUE"),
            "{err}"
        );
        let long = check_conditions(&[condition(base, 61)], "http://s", Some(64));
        let err = long.unwrap_err().to_string();
        assert!(
            err.contains("request 0 needs 65 tokens") && err.contains("max_model_len 64"),
            "{err}"
        );
    }

    #[test]
    fn salts_separate_runs_conditions_tenants_and_uncached_requests() {
        let on = Policy::of(&EngineConfig::default());
        let off = Policy {
            caching: false,
            ..on
        };
        let a = Salts::new("r1", 0, on);
        assert_eq!(
            a.of(3, None),
            a.of(4, None),
            "one condition shares its cache"
        );
        assert_ne!(a.of(3, Some("x")), a.of(3, Some("y")));
        assert_ne!(a.of(3, Some("x")), a.of(3, None));
        assert_ne!(a.of(3, None), Salts::new("r1", 1, on).of(3, None));
        assert_ne!(a.of(3, None), Salts::new("r2", 0, on).of(3, None));
        let u = Salts::new("r1", 0, off);
        assert_ne!(
            u.of(3, Some("x")),
            u.of(4, Some("x")),
            "caching off: own salt"
        );
        assert_eq!(on.max_in_flight, 256);
    }
}
