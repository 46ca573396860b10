//! Plays one condition's script against a server, as concurrent streams.
//!
//! Contract: the script's release rules are `ScriptWorkload`'s, on the
//! client's clock (seconds since the condition started): a request is due
//! at its time, or its delay after the last of its dependencies finished
//! (a closed loop's next request is due when the previous one's stream
//! ends). A due request waits for a place under [`Policy::max_in_flight`]
//! (FIFO), then streams; every stream is its own task, so hundreds run at
//! once. A request's record has as its arrival the moment right before its
//! POST went out, as vLLM's benchmark_serving starts the clock, or, when it
//! had to wait for a place under the cap, the time it was due (that wait
//! stands for the engine's queue, which an engine's TTFT counts); the
//! client's read time of each of its tokens ([`super::sse`]) and the
//! server's `cached_tokens`; preemptions cannot be seen from outside and
//! are 0.
//! The first failed request ends the condition with its error; the streams
//! still open are dropped, which closes their connections (a vLLM server
//! then aborts them).

use super::client::{completion_body, Exchange, Http};
use super::error::{EndpointError, RequestFailure};
use super::options::{Policy, Salts};
use crate::backend::ProgressEvent;
use crate::script::{Script, ScriptWorkload};
use sim::{Arrival, RequestRecord, RunRecords, Workload};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;

/// One condition's records, and how many of its requests came back
/// without `cached_tokens`.
#[derive(Debug)]
pub struct Played {
    pub records: RunRecords,
    pub without_cached_tokens: usize,
}

/// What a request's record needs besides its stream.
struct Sent {
    tag: String,
    due_s: f64,
    prompt_tokens: usize,
    max_tokens: usize,
}

/// A stream's end: the request's id, whether it waited for a place, and
/// what was exchanged.
type Outcome = (u64, bool, Result<Exchange, RequestFailure>);

/// The streams of one condition, and what each one's record will need.
struct Streams<'a> {
    http: &'a Arc<Http>,
    model: &'a str,
    salts: &'a Salts,
    start: Instant,
    gate: Arc<Semaphore>,
    tasks: JoinSet<Outcome>,
    sent: HashMap<u64, Sent>,
    ids: HashMap<Id, u64>,
}

impl Streams<'_> {
    /// Starts the task that sends `arrival` when it is due and reads its stream.
    fn launch(&mut self, arrival: Arrival) {
        let request = arrival.request;
        let id = request.id.0;
        let salt = self.salts.of(id, request.cache_salt.as_deref());
        let body = completion_body(
            self.model,
            &request.prompt_token_ids,
            request.max_tokens,
            &salt,
        );
        let due_s = request.arrival_time;
        self.sent.insert(
            id,
            Sent {
                tag: arrival.tag,
                due_s,
                prompt_tokens: request.prompt_token_ids.len(),
                max_tokens: request.max_tokens,
            },
        );
        let (http, gate, start) = (self.http.clone(), self.gate.clone(), self.start);
        let handle = self.tasks.spawn(async move {
            let due = start + Duration::from_secs_f64(due_s.max(0.0));
            // The timer rounds a deadline up to its next millisecond tick,
            // even one already past: a closed loop's next request, due when
            // the previous one finished, would go out about 1 ms late.
            if due > Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            // Held until the stream ends; the semaphore is never closed.
            let (_place, waited) = match gate.clone().try_acquire_owned() {
                Ok(place) => (Ok(place), false),
                Err(_) => (gate.acquire_owned().await, true),
            };
            (id, waited, http.stream_completion(&body, start).await)
        });
        self.ids.insert(handle.id(), id);
    }

    /// The next stream to end: its request id and outcome.
    async fn next(&mut self) -> Option<Outcome> {
        let joined = self.tasks.join_next_with_id().await?;
        Some(match joined {
            Ok((_, outcome)) => outcome,
            Err(e) => {
                let id = self.ids.get(&e.id()).copied().unwrap_or(u64::MAX);
                (id, false, Err(RequestFailure::Task(e.to_string())))
            }
        })
    }
}

/// Plays `script` on `http`'s server as `model`.
pub async fn play(
    http: &Arc<Http>,
    model: &str,
    script: &Script,
    policy: Policy,
    salts: &Salts,
    observe: &dyn Fn(ProgressEvent),
) -> Result<Played, EndpointError> {
    let mut streams = Streams {
        http,
        model,
        salts,
        start: Instant::now(),
        gate: Arc::new(Semaphore::new(policy.max_in_flight)),
        tasks: JoinSet::new(),
        sent: HashMap::new(),
        ids: HashMap::new(),
    };
    let mut workload = ScriptWorkload::new(script.clone());
    for arrival in workload.initial() {
        streams.launch(arrival);
    }
    let mut records = RunRecords::default();
    let mut without_cached_tokens = 0;
    while let Some((id, waited, result)) = streams.next().await {
        let Some(request) = streams.sent.remove(&id) else {
            continue;
        };
        // Returning drops the other tasks, and with them their connections.
        let exchange = result.map_err(|failure| EndpointError::Request {
            id,
            tag: request.tag.clone(),
            failure,
        })?;
        without_cached_tokens += usize::from(exchange.streamed.cached_tokens.is_none());
        let finish_s = exchange.streamed.finish_s;
        records.requests.push(record(id, request, waited, exchange));
        observe(ProgressEvent {
            requests_done: records.requests.len(),
            steps: 0,
        });
        for arrival in workload.on_finish(id, finish_s) {
            streams.launch(arrival);
        }
    }
    records.requests.sort_by_key(|r| r.id);
    // The server's counters, as vLLM counts them: prompt tokens looked up
    // at admission, and those found cached.
    records.prefix_cache_queries = records
        .requests
        .iter()
        .map(|r| r.prompt_tokens as u64)
        .sum();
    records.prefix_cache_hits = records
        .requests
        .iter()
        .map(|r| r.cached_tokens as u64)
        .sum();
    Ok(Played {
        records,
        without_cached_tokens,
    })
}

/// The record of request `id`; its arrival is where its TTFT clock starts:
/// the POST, or the due time of a request that waited for a place.
fn record(id: u64, sent: Sent, waited: bool, exchange: Exchange) -> RequestRecord {
    let Exchange { sent_s, streamed } = exchange;
    RequestRecord {
        id,
        tag: sent.tag,
        arrival_s: if waited { sent.due_s } else { sent_s },
        prompt_tokens: sent.prompt_tokens,
        max_tokens: sent.max_tokens,
        cached_tokens: streamed.cached_tokens.unwrap_or(0),
        preemptions: 0,
        token_times_s: streamed.token_times_s,
        finish_s: Some(streamed.finish_s),
        finish_reason: streamed.finish_reason,
    }
}

#[cfg(test)]
#[path = "timing_tests.rs"]
mod tests;
