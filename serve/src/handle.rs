//! What the HTTP handlers hold of the engine: [`EngineHandle`] to submit,
//! [`RequestStream`] to receive one request's tokens.
//!
//! Contract: [`EngineHandle::submit`] hands a request to the engine loop and
//! waits for its verdict: queued (a [`RequestStream`]), or refused with a 400
//! naming why it can never run, or a 503 while the server drains or after the
//! engine loop stopped. Dropping a [`RequestStream`] before its `Finished`
//! event aborts the request, so a client that disconnects gives its KV
//! blocks back to the pool.

use crate::error::ApiError;
use engine::{FinishReason, Request, RequestId};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;
use tokio::sync::{mpsc as tokio_mpsc, oneshot};

/// What happens to one request, in order: `Admitted`, then `Token`s, then
/// `Finished` (or `Failed` if the engine broke).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Scheduled for the first time; `cached_tokens` of the prompt were in
    /// the prefix cache.
    Admitted {
        cached_tokens: usize,
    },
    Token(u32),
    Finished(FinishReason),
    Failed(String),
}

pub(crate) struct Submission {
    pub request: Request,
    pub arrival: Instant,
    pub events: tokio_mpsc::UnboundedSender<Event>,
    pub reply: oneshot::Sender<Result<(), ApiError>>,
}

pub(crate) enum Command {
    Submit(Submission),
    Abort(RequestId),
    /// Leave once no request is unfinished.
    Stop,
}

/// Fixed facts about the engine the handlers need before submitting.
#[derive(Debug, Clone)]
pub struct EngineLimits {
    pub max_model_len: usize,
    /// Blocks of the engine's KV pool (the null block included).
    pub kv_blocks: usize,
}

/// Shared by every handler; cheap to clone.
#[derive(Clone)]
pub struct EngineHandle {
    pub(crate) commands: mpsc::Sender<Command>,
    next_id: Arc<AtomicU64>,
    /// Requests submitted and not yet finished, aborted or refused.
    pub(crate) in_flight: Arc<AtomicUsize>,
    draining: Arc<AtomicBool>,
    pub limits: EngineLimits,
}

impl EngineHandle {
    /// `in_flight` is the engine loop's count of unfinished requests.
    pub(crate) fn new(
        commands: mpsc::Sender<Command>,
        limits: EngineLimits,
        in_flight: Arc<AtomicUsize>,
    ) -> Self {
        Self {
            commands,
            next_id: Arc::new(AtomicU64::new(0)),
            in_flight,
            draining: Arc::new(AtomicBool::new(false)),
            limits,
        }
    }

    /// From now on new requests get 503; running ones finish.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Requests the engine has not finished yet (waiting, running, or not
    /// yet seen by the loop).
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Queues a request and returns its events.
    pub async fn submit(
        &self,
        prompt_token_ids: Vec<u32>,
        max_tokens: usize,
        ignore_eos: bool,
        eos_token_id: Option<u32>,
        cache_salt: Option<String>,
    ) -> Result<RequestStream, ApiError> {
        if self.is_draining() {
            return Err(ApiError::unavailable(
                "the server is shutting down and takes no new requests",
            ));
        }
        let id = RequestId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let request = Request {
            id,
            prompt_token_ids,
            max_tokens,
            ignore_eos,
            eos_token_id,
            cache_salt,
            arrival_time: 0.0,
        };
        let (events, receiver) = tokio_mpsc::unbounded_channel();
        let (reply, verdict) = oneshot::channel();
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let submission = Submission {
            request,
            arrival: Instant::now(),
            events,
            reply,
        };
        let stopped = || ApiError::unavailable("the engine loop has stopped; restart the server");
        if self.commands.send(Command::Submit(submission)).is_err() {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            return Err(stopped());
        }
        // The loop answers every submission it receives (and counts it out
        // of `in_flight` itself when it refuses one).
        verdict.await.map_err(|_| stopped())??;
        Ok(RequestStream {
            id,
            events: receiver,
            commands: self.commands.clone(),
            finished: false,
        })
    }

    pub(crate) fn stop(&self) {
        // The loop may already be gone; nothing is left to stop then.
        let _ = self.commands.send(Command::Stop);
    }
}

/// One request's events; dropping it early aborts the request.
pub struct RequestStream {
    id: RequestId,
    events: tokio_mpsc::UnboundedReceiver<Event>,
    commands: mpsc::Sender<Command>,
    finished: bool,
}

impl RequestStream {
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The next event; `None` after `Finished` or `Failed`.
    pub async fn next(&mut self) -> Option<Event> {
        if self.finished {
            return None;
        }
        let event = self.events.recv().await;
        match &event {
            Some(Event::Finished(_)) | Some(Event::Failed(_)) | None => self.finished = true,
            _ => {}
        }
        event
    }
}

impl Drop for RequestStream {
    fn drop(&mut self) {
        if !self.finished {
            // The loop may have stopped already, and then holds nothing.
            let _ = self.commands.send(Command::Abort(self.id));
        }
    }
}
