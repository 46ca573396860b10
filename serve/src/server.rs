//! Starting, running and stopping the server.
//!
//! Contract: [`start`] starts the engine loop thread, binds the address
//! (port 0: an ephemeral port, see [`RunningServer::addr`]) and serves HTTP
//! on the current tokio runtime; [`start_with`] does the same with an engine
//! the loop thread builds first (a real runner, which must stay on the
//! thread that made it), so a failed build is its error and nothing is
//! bound. [`RunningServer::shutdown`] drains: new
//! generation requests get 503 (and `/health` 503) while every request
//! already submitted finishes; then the listener closes, open connections
//! end, the engine loop stops and its thread is joined.
//! [`RunningServer::run_until_signal`] does the same on SIGINT or SIGTERM.
//! Accepted connections have TCP_NODELAY set, so every streamed token
//! leaves when it is written.

use crate::engine_loop;
use crate::error::ServeError;
use crate::handle::EngineLimits;
use crate::metrics::Metrics;
use crate::routes::{router, App};
use crate::text::TextCodec;
use axum::serve::ListenerExt;
use engine::{EngineCore, ModelRunner};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How often a drain checks whether the last request has finished.
const DRAIN_POLL: Duration = Duration::from_millis(5);

/// Everything about the server that is not the engine.
#[derive(Debug)]
pub struct ServerConfig {
    pub addr: SocketAddr,
    /// The name `/v1/models` lists and requests must use (or leave out).
    pub model_name: String,
    /// Wall-clock seconds per modeled second of a simulated step: 1 is real
    /// time, 0.01 runs 100× faster (for tests).
    pub time_scale: f64,
    pub codec: TextCodec,
    /// The model's end-of-sequence token: a request without `ignore_eos`
    /// stops there. `None` (the simulated runner's placeholder tokens):
    /// every request runs to `max_tokens`.
    pub eos_token_id: Option<u32>,
}

impl ServerConfig {
    /// Loopback, an ephemeral port, real time, the byte stand-in codec.
    pub fn local(model_name: &str) -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            model_name: model_name.to_string(),
            time_scale: 1.0,
            codec: TextCodec::Bytes,
            eos_token_id: None,
        }
    }
}

pub struct RunningServer {
    addr: SocketAddr,
    limits: EngineLimits,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<Result<(), ServeError>>,
}

/// Starts the engine loop on `engine`, binds and serves until shut down.
pub async fn start<R: ModelRunner + Send + 'static>(
    engine: EngineCore<R>,
    config: ServerConfig,
) -> Result<RunningServer, ServeError> {
    start_with(move || Ok::<_, Infallible>(engine), config).await
}

/// Starts the engine loop thread, which runs `build` and then owns the
/// engine; once it is built, binds and serves until shut down. A failed
/// build is returned before anything is bound.
pub async fn start_with<R, B, E>(
    build: B,
    config: ServerConfig,
) -> Result<RunningServer, ServeError>
where
    R: ModelRunner + 'static,
    B: FnOnce() -> Result<EngineCore<R>, E> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let metrics = Arc::new(Metrics::new(&config.model_name));
    let (handle, engine_thread) =
        engine_loop::spawn_with(build, config.time_scale, metrics.clone()).await?;
    let listener = match tokio::net::TcpListener::bind(config.addr).await {
        Ok(listener) => listener,
        Err(source) => {
            // No request can have reached the loop: it stops at once.
            handle.stop();
            let _ = tokio::task::spawn_blocking(move || engine_thread.join()).await;
            return Err(ServeError::Bind {
                addr: config.addr.to_string(),
                source,
            });
        }
    };
    let addr = listener.local_addr().map_err(ServeError::Http)?;
    let limits = handle.limits.clone();
    let app = Arc::new(App {
        engine: handle.clone(),
        codec: config.codec,
        model: config.model_name,
        eos_token_id: config.eos_token_id,
        metrics,
    });
    let (shutdown, requested) = oneshot::channel::<()>();
    let drain_handle = handle.clone();
    let drained = async move {
        // A dropped sender (the RunningServer gone) also means stop.
        let _ = requested.await;
        drain_handle.start_draining();
        while drain_handle.in_flight() > 0 {
            tokio::time::sleep(DRAIN_POLL).await;
        }
    };
    let task = tokio::spawn(async move {
        // Each token is a small write: without TCP_NODELAY, Nagle's
        // algorithm holds it until the previous one is acknowledged, and a
        // client's delayed ACK turns 1 ms gaps into 40 ms bursts (uvicorn,
        // which serves vLLM, sets it too).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let served = axum::serve(listener, router(app))
            .with_graceful_shutdown(drained)
            .await
            .map_err(ServeError::Http);
        handle.stop();
        let joined = tokio::task::spawn_blocking(move || engine_thread.join())
            .await
            .map_err(|_| ServeError::EnginePanicked)?;
        served?;
        joined.map_err(|_| ServeError::EnginePanicked)?
    });
    Ok(RunningServer {
        addr,
        limits,
        shutdown,
        task,
    })
}

impl RunningServer {
    /// The bound address (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The engine's context length and KV pool, as built.
    pub fn engine_limits(&self) -> &EngineLimits {
        &self.limits
    }

    /// Drains and stops; returns once the engine loop thread has ended.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        // The server task may have ended on its own; its result says why.
        let _ = self.shutdown.send(());
        self.task.await.map_err(|_| ServeError::EnginePanicked)?
    }

    /// Serves until one of `signals` arrives, then drains as [`Self::shutdown`].
    pub async fn run_until_signal(self, mut signals: ShutdownSignals) -> Result<(), ServeError> {
        let RunningServer {
            addr,
            limits,
            shutdown,
            mut task,
        } = self;
        tokio::select! {
            result = &mut task => result.map_err(|_| ServeError::EnginePanicked)?,
            () = signals.wait() => RunningServer { addr, limits, shutdown, task }.shutdown().await,
        }
    }
}

/// SIGINT and SIGTERM handlers, installed before the server says it is
/// ready so that a signal sent right after never kills the process outright.
pub struct ShutdownSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    /// Needs a tokio runtime.
    pub fn install() -> Result<Self, ServeError> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt()).map_err(ServeError::Signal)?,
                terminate: signal(SignalKind::terminate()).map_err(ServeError::Signal)?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    async fn wait(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        #[cfg(not(unix))]
        {
            // Without the handler there is no clean stop to wait for.
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// For a synchronous caller (`exp serve --mode sim`): [`serve_blocking_with`]
/// on an engine built already.
pub fn serve_blocking<R: ModelRunner + Send + 'static>(
    engine: EngineCore<R>,
    config: ServerConfig,
    on_ready: impl FnOnce(&RunningServer),
) -> Result<(), ServeError> {
    serve_blocking_with(move || Ok::<_, Infallible>(engine), config, on_ready)
}

/// For a synchronous caller (`exp serve`): builds a tokio runtime, installs
/// the signal handlers, starts the server on the engine `build` makes on the
/// engine loop thread ([`start_with`]), calls `on_ready` once it is bound,
/// and serves until SIGINT or SIGTERM has drained it.
pub fn serve_blocking_with<R, B, E>(
    build: B,
    config: ServerConfig,
    on_ready: impl FnOnce(&RunningServer),
) -> Result<(), ServeError>
where
    R: ModelRunner + 'static,
    B: FnOnce() -> Result<EngineCore<R>, E> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(async move {
        let mut signals = ShutdownSignals::install()?;
        // A build can take a while (a GPU runner's warm-up): a signal then
        // ends the wait instead of waiting for the build to finish.
        let server = tokio::select! {
            server = start_with(build, config) => server?,
            () = signals.wait() => return Err(ServeError::InterruptedBuild),
        };
        on_ready(&server);
        server.run_until_signal(signals).await
    })
}
