//! Real mode over HTTP: a condition's script played against any
//! OpenAI-compatible server (vLLM, or `exp serve --mode sim` as a mock).
//!
//! Contract: [`EndpointBackend::connect`] reads `GET /v1/models` before
//! anything runs (an unreachable server, or a `--model-name` it does not
//! serve, fails here) and takes the first model listed unless a name is
//! given. Each condition's requests are streamed to `/v1/completions` with
//! token-id prompts ([`client`]), under the client-side rules of
//! [`options`] (`max_num_seqs` as a cap on requests in flight, caching off
//! as a salt per request, a salt namespace per run and condition), timed on
//! the client's clock ([`play`], [`sse`]). The records are the engine's
//! record type, so `summary.csv` and `requests.csv` come out as in every
//! mode; the server's steps cannot be seen from outside, so there are no
//! step records and no `steps.csv` ([`Backend::observes_steps`]), which
//! `meta.ron`'s `endpoint` entry says. Conditions run one at a time so they
//! do not disturb each other's timings.

mod client;
mod error;
mod options;
mod play;
mod sse;

pub use client::{base_url, ServedModel, READ_IDLE};
pub use error::{EndpointError, RequestFailure};
pub use options::Policy;

use super::{Backend, BackendError, BackendInfo, LoadedModel, ProgressEvent};
use crate::catalogue::Condition;
use crate::script::Script;
use client::Http;
use engine::EngineConfig;
use serde::Serialize;
use sim::RunRecords;
use std::cell::Cell;
use std::sync::Arc;

/// `--endpoint URL [--model-name NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSpec {
    pub url: String,
    /// `None`: the first model `/v1/models` lists.
    pub model_name: Option<String>,
}

/// What `meta.ron` records of a run against an endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointMeta {
    pub url: String,
    pub model_name: String,
    pub measured: &'static str,
    pub steps: &'static str,
    pub engine_options: &'static str,
    pub cached_tokens: String,
}

const MEASURED: &str = "on the client, as vLLM's benchmark_serving: arrival = right before the \
    POST goes out (the due time if the request waited for a place under max_num_seqs); a \
    token's time = when the client read the SSE chunk carrying it; TTFT at the first chunk \
    with a token; one inter-token gap per later chunk with tokens (k tokens in one chunk share \
    its time and make one gap)";
const STEPS: &str = "not observable from outside the server: no steps.csv";
const ENGINE_OPTIONS: &str = "the server's own, except max_num_seqs (a client-side cap on \
    requests in flight) and enable_prefix_caching=false (a cache salt per request)";

pub struct EndpointBackend {
    runtime: tokio::runtime::Runtime,
    http: Arc<Http>,
    model_name: String,
    max_model_len: Option<usize>,
    vocab: u32,
    run_token: String,
    conditions_run: Cell<u64>,
    without_cached_tokens: Cell<usize>,
}

impl EndpointBackend {
    /// Connects to the server at `spec.url` and picks the model; prompts are
    /// token ids below `model`'s vocabulary (the served model's shape).
    pub fn connect(spec: &EndpointSpec, model: &LoadedModel) -> Result<Self, EndpointError> {
        let http = Http::new(&spec.url)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| EndpointError::Client(e.to_string()))?;
        let served = runtime.block_on(http.models())?;
        let chosen = pick_model(&served, spec.model_name.as_deref(), http.base())?;
        Ok(Self {
            runtime,
            model_name: chosen.id.clone(),
            max_model_len: chosen.max_model_len,
            http: Arc::new(http),
            vocab: model.prompt_vocab(),
            run_token: options::run_token(),
            conditions_run: Cell::new(0),
            without_cached_tokens: Cell::new(0),
        })
    }

    /// The model name requests carry.
    pub fn model_name(&self) -> &str {
        &self.model_name
    }

    pub fn url(&self) -> &str {
        self.http.base()
    }

    fn meta(&self) -> EndpointMeta {
        let missing = self.without_cached_tokens.get();
        let cached_tokens = if missing == 0 {
            "usage.prompt_tokens_details.cached_tokens".to_string()
        } else {
            format!(
                "{missing} request(s) came back without usage.prompt_tokens_details and count \
                 0 cached tokens; start vLLM with --enable-prompt-tokens-details"
            )
        };
        EndpointMeta {
            url: self.url().to_string(),
            model_name: self.model_name.clone(),
            measured: MEASURED,
            steps: STEPS,
            engine_options: ENGINE_OPTIONS,
            cached_tokens,
        }
    }
}

/// The model named `wanted`, else the first served.
fn pick_model<'a>(
    served: &'a [ServedModel],
    wanted: Option<&str>,
    url: &str,
) -> Result<&'a ServedModel, EndpointError> {
    match wanted {
        None => served.first().ok_or_else(|| EndpointError::NoModel {
            url: url.to_string(),
        }),
        Some(name) => served.iter().find(|m| m.id == name).ok_or_else(|| {
            let ids: Vec<&str> = served.iter().map(|m| m.id.as_str()).collect();
            EndpointError::ModelNotServed {
                name: name.to_string(),
                url: url.to_string(),
                served: if ids.is_empty() {
                    "no model".into()
                } else {
                    ids.join(", ")
                },
            }
        }),
    }
}

impl Backend for EndpointBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            mode: "real",
            cost_model: "measured at the client over HTTP".into(),
            gpu: None,
            model: self.model_name.clone(),
            runner: Some(format!("endpoint {}", self.url())),
            cost_label: "measured".into(),
            endpoint: Some(self.meta()),
            expected_error: None,
        }
    }

    fn vocab(&self) -> u32 {
        self.vocab
    }

    fn kv_blocks(&self, _engine: &EngineConfig) -> Option<usize> {
        None
    }

    fn observes_steps(&self) -> bool {
        false
    }

    fn check_conditions(&self, conditions: &[Condition]) -> Result<(), BackendError> {
        options::check_conditions(conditions, self.url(), self.max_model_len)
    }

    fn run(&self, engine: &EngineConfig, script: &Script) -> Result<RunRecords, BackendError> {
        self.run_observed(engine, script, &|_| {})
    }

    fn run_observed(
        &self,
        engine: &EngineConfig,
        script: &Script,
        observe: &dyn Fn(ProgressEvent),
    ) -> Result<RunRecords, BackendError> {
        let policy = Policy::of(engine);
        let condition = self.conditions_run.get();
        self.conditions_run.set(condition + 1);
        let salts = options::Salts::new(&self.run_token, condition, policy);
        let played = self.runtime.block_on(play::play(
            &self.http,
            &self.model_name,
            script,
            policy,
            &salts,
            observe,
        ))?;
        self.without_cached_tokens
            .set(self.without_cached_tokens.get() + played.without_cached_tokens);
        Ok(played.records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_model_unless_one_is_named() {
        let served = [
            ServedModel {
                id: "a".into(),
                max_model_len: Some(8),
            },
            ServedModel {
                id: "b".into(),
                max_model_len: None,
            },
        ];
        assert_eq!(pick_model(&served, None, "u").unwrap().id, "a");
        assert_eq!(pick_model(&served, Some("b"), "u").unwrap().id, "b");
        let err = pick_model(&served, Some("c"), "http://s").unwrap_err();
        assert!(err.to_string().contains("http://s serves a, b"), "{err}");
        assert!(matches!(
            pick_model(&[], None, "u"),
            Err(EndpointError::NoModel { .. })
        ));
    }
}
