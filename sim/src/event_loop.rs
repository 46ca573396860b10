//! The one event loop shared by real and simulated runs.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    #[error(transparent)]
    Request(#[from] engine::RequestError),
}
