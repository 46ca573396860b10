//! `SimRunner`: a `ModelRunner` whose step time comes from a cost model.

/// Prices each batch with a cost model and returns placeholder tokens.
pub struct SimRunner {}
