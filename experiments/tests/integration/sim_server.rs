//! An `exp serve --mode sim` server in-process on an ephemeral loopback
//! port, for the tests that point `exp` at an endpoint (shared by the
//! integration binary and `tests/endpoint_calibrate.rs`).

use experiments::backend::cost::resolve;
use experiments::backend::{CostSource, LoadedModel, ModelChoice};

/// An `exp serve --mode sim` server on loopback, with its runtime.
pub struct SimServer {
    runtime: tokio::runtime::Runtime,
    server: Option<serve::RunningServer>,
    pub url: String,
}

impl SimServer {
    pub fn start(time_scale: f64) -> Self {
        let model = LoadedModel::config_only(&ModelChoice::Preset("qwen3-0.6b".into())).unwrap();
        let cost = resolve(&CostSource::Default("h200-sxm".into()), &model).unwrap();
        // The KV pool `exp serve` gives the model on the simulated H200.
        let config = engine::EngineConfig::default();
        let runner = sim::SimRunner::new(cost.model.clone(), cost.kv_blocks(&config));
        let engine = engine::EngineCore::new(config, runner).unwrap();
        let mut server_config = serve::ServerConfig::local("qwen3-0.6b");
        server_config.time_scale = time_scale;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime
            .block_on(serve::start(engine, server_config))
            .unwrap();
        let url = format!("http://{}", server.addr());
        Self {
            runtime,
            server: Some(server),
            url,
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = self.runtime.block_on(server.shutdown());
        }
    }
}
