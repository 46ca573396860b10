//! The engine loop: one thread that owns the `EngineCore` and paces it on
//! the wall clock.
//!
//! Contract:
//! - [`spawn_with`] builds the engine on the loop thread itself (a real
//!   runner may not move between threads) and reports a failed build before
//!   any request can arrive; [`spawn`] takes an engine built elsewhere.
//! - Commands (submit, abort, stop) arrive on a channel; those that arrive
//!   during a step are handled after it, as in vLLM's engine core loop.
//! - A submission is refused (400, with the engine's reason) when it can
//!   never run: empty prompt, or prompt + max_tokens over `max_model_len`.
//!   That also covers "more KV blocks than the pool": `EngineCore::new`
//!   refuses a pool that cannot hold one request of `max_model_len`.
//!   Otherwise it queues, however long the queue: overload delays requests
//!   and loses none.
//! - A step whose runner reports a modeled time (the simulated runner) lasts
//!   that time × `time_scale` on the wall clock, measured from the step's
//!   start; its tokens and finishes are sent at the step's end, when a real
//!   engine would have them. A runner without a modeled time (a real one)
//!   is not paced. Before each step but the first, the runner is told how
//!   long the engine sat idle since the last one ended, in its own time
//!   (wall seconds / `time_scale`; `ModelRunner::idle`).
//! - An aborted request, or one whose receiver is gone (a client that
//!   disconnected), is aborted in the engine and its blocks go back to the
//!   pool.
//! - `Stop` ends the loop once no request is unfinished; if the runner
//!   fails, every unfinished request gets `Failed` and the loop returns the
//!   error.

use crate::error::{ApiError, ServeError};
use crate::handle::{Command, EngineHandle, EngineLimits, Event, Submission};
use crate::metrics::Metrics;
use engine::{EngineCore, ModelRunner, RequestId, StepOutcome};
use sim::{Clock, WallClock};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc as tokio_mpsc, oneshot};

/// How long the loop waits for a command after a step that scheduled
/// nothing, so a stalled queue does not spin a core.
const IDLE_POLL: Duration = Duration::from_millis(5);

struct Tracked {
    events: tokio_mpsc::UnboundedSender<Event>,
    arrival: Instant,
    last_token: Option<Instant>,
    prompt_tokens: usize,
}

struct LoopState<R: ModelRunner> {
    engine: EngineCore<R>,
    /// The handles' count of unfinished requests (the loop counts them out;
    /// the loop holds the counter, not a handle, whose command sender would
    /// keep the inbox open).
    in_flight: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
    time_scale: f64,
    requests: HashMap<RequestId, Tracked>,
    stopping: bool,
    /// When the last step that ran a batch ended (wall clock).
    last_end: Option<f64>,
}

/// Starts the loop thread on an engine already built; the handle is what
/// handlers submit through.
pub async fn spawn<R: ModelRunner + Send + 'static>(
    engine: EngineCore<R>,
    time_scale: f64,
    metrics: Arc<Metrics>,
) -> Result<(EngineHandle, JoinHandle<Result<(), ServeError>>), ServeError> {
    spawn_with(move || Ok::<_, Infallible>(engine), time_scale, metrics).await
}

/// Starts the loop thread, which first runs `build` and then owns the engine
/// it returns, so the runner never leaves the thread that made it (the CUDA
/// runner is not `Send`: its context, graphs and pinned buffers belong to
/// one thread). Returns once `build` has finished: its error, if it failed
/// (the thread has then ended), else the handle.
pub async fn spawn_with<R, B, E>(
    build: B,
    time_scale: f64,
    metrics: Arc<Metrics>,
) -> Result<(EngineHandle, JoinHandle<Result<(), ServeError>>), ServeError>
where
    R: ModelRunner + 'static,
    B: FnOnce() -> Result<EngineCore<R>, E> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if !(time_scale.is_finite() && time_scale > 0.0) {
        return Err(ServeError::TimeScale(time_scale));
    }
    let (commands, inbox) = mpsc::channel();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let (built, ready) = oneshot::channel::<Result<EngineLimits, ServeError>>();
    let counter = in_flight.clone();
    let thread = std::thread::Builder::new()
        .name("engine-loop".into())
        .spawn(move || {
            let engine = match build() {
                Ok(engine) => engine,
                Err(e) => {
                    let error = ServeError::Build(e.into());
                    // The spawner waits for this report; it cannot be gone.
                    let _ = built.send(Err(error));
                    return Ok(());
                }
            };
            let limits = EngineLimits {
                max_model_len: engine.config().max_model_len,
                kv_blocks: engine.kv_cache().num_blocks(),
            };
            if built.send(Ok(limits)).is_err() {
                return Ok(());
            }
            let mut state = LoopState {
                engine,
                in_flight: counter,
                metrics,
                time_scale,
                requests: HashMap::new(),
                stopping: false,
                last_end: None,
            };
            state.run(inbox)
        })
        .map_err(ServeError::Spawn)?;
    match ready.await {
        Ok(Ok(limits)) => Ok((EngineHandle::new(commands, limits, in_flight), thread)),
        Ok(Err(error)) => {
            // Ended right after reporting; joining only reaps it.
            let _ = thread.join();
            Err(error)
        }
        // The thread dropped its report unsent: `build` panicked.
        Err(_) => {
            let _ = thread.join();
            Err(ServeError::EnginePanicked)
        }
    }
}

impl<R: ModelRunner> LoopState<R> {
    fn run(&mut self, inbox: mpsc::Receiver<Command>) -> Result<(), ServeError> {
        let mut clock = WallClock::new();
        self.publish();
        loop {
            if !self.engine.has_unfinished() {
                if self.stopping {
                    return Ok(());
                }
                // Idle: block until something arrives; every sender gone means
                // the server is gone.
                match inbox.recv() {
                    Ok(command) => self.handle(command),
                    Err(_) => return Ok(()),
                }
            }
            while let Ok(command) = inbox.try_recv() {
                self.handle(command);
            }
            if !self.engine.has_unfinished() {
                self.publish();
                continue;
            }
            let start = clock.now();
            if let Some(end) = self.last_end {
                // In the runner's time: the wall clock runs time_scale as fast.
                self.engine
                    .runner_mut()
                    .idle((start - end).max(0.0) / self.time_scale);
            }
            let outcome = match self.engine.step() {
                Ok(outcome) => outcome,
                Err(e) => return Err(self.fail(e.to_string())),
            };
            if outcome.shape.seqs.is_empty() {
                self.publish();
                if let Ok(command) = inbox.recv_timeout(IDLE_POLL) {
                    self.handle(command);
                }
                continue;
            }
            if let Some(seconds) = outcome.modeled_seconds {
                clock.wait_until(start + seconds * self.time_scale);
            }
            self.last_end = Some(clock.now());
            // Gauges first, so a client that reads /metrics after a token of
            // this step sees the state that produced it; again after, for the
            // blocks that aborts and finished requests give back.
            self.publish();
            self.dispatch(outcome);
            self.publish();
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Submit(s) => self.submit(s),
            Command::Abort(id) => self.abort(id),
            Command::Stop => self.stopping = true,
        }
    }

    fn submit(&mut self, s: Submission) {
        let verdict = self
            .engine
            .add_request(s.request.clone())
            .map_err(|e| ApiError::bad_request(e.to_string(), Some("prompt")));
        match verdict {
            Ok(()) => {
                self.requests.insert(
                    s.request.id,
                    Tracked {
                        events: s.events,
                        arrival: s.arrival,
                        last_token: None,
                        prompt_tokens: s.request.prompt_token_ids.len(),
                    },
                );
                if s.reply.send(Ok(())).is_err() {
                    // The handler is gone before it heard back.
                    self.abort(s.request.id);
                }
            }
            Err(e) => {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                // A handler that is gone needs no answer.
                let _ = s.reply.send(Err(e));
            }
        }
    }

    fn abort(&mut self, id: RequestId) {
        if self.requests.remove(&id).is_some() {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            // Finished in the same step the abort was sent: nothing to free.
            let _ = self.engine.abort(id);
        }
    }

    fn dispatch(&mut self, outcome: StepOutcome) {
        let now = Instant::now();
        let mut gone = Vec::new();
        let mut first_prompt_tokens = 0u64;
        let mut ttft = Vec::new();
        let mut itl = Vec::new();
        for (id, cached_tokens) in outcome.admitted {
            if let Some(t) = self.requests.get(&id) {
                if t.events.send(Event::Admitted { cached_tokens }).is_err() {
                    gone.push(id);
                }
            }
        }
        for (id, token) in &outcome.tokens {
            let Some(t) = self.requests.get_mut(id) else {
                continue;
            };
            match t.last_token {
                None => {
                    ttft.push((now - t.arrival).as_secs_f64());
                    first_prompt_tokens += t.prompt_tokens as u64;
                }
                Some(last) => itl.push((now - last).as_secs_f64()),
            }
            t.last_token = Some(now);
            if t.events.send(Event::Token(*token)).is_err() {
                gone.push(*id);
            }
        }
        // Counted before any request hears it finished, so a client that
        // reads /metrics after its answer sees its tokens.
        let generated = outcome.tokens.len() as u64;
        let preempted = outcome.preempted.len() as u64;
        self.metrics.update(|m| {
            m.num_preemptions += preempted;
            m.prompt_tokens += first_prompt_tokens;
            m.generation_tokens += generated;
            ttft.iter().for_each(|v| m.time_to_first_token.observe(*v));
            itl.iter().for_each(|v| m.inter_token_latency.observe(*v));
        });
        for (id, reason) in outcome.finished {
            if let Some(t) = self.requests.remove(&id) {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                // A receiver gone at the last token has nothing left to abort.
                let _ = t.events.send(Event::Finished(reason));
            }
        }
        for id in gone {
            self.abort(id);
        }
    }

    /// Gauges and cache counters from the engine's current state.
    fn publish(&self) {
        let kv = self.engine.kv_cache();
        let pool = kv.num_blocks().saturating_sub(1).max(1);
        let usage = kv.num_used_blocks() as f64 / pool as f64;
        let (queries, hits) = self.engine.prefix_cache_stats();
        let (running, waiting) = (self.engine.num_running(), self.engine.num_waiting());
        self.metrics.update(|m| {
            m.num_requests_running = running;
            m.num_requests_waiting = waiting;
            m.kv_cache_usage = usage;
            m.prefix_cache_queries = queries;
            m.prefix_cache_hits = hits;
        });
    }

    fn fail(&mut self, message: String) -> ServeError {
        for (_, t) in self.requests.drain() {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let _ = t.events.send(Event::Failed(message.clone()));
        }
        ServeError::Engine(message)
    }
}
