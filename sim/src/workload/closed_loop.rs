//! Closed loop: `clients` clients, each sending its next request when its
//! previous one finishes (plus a think time), `requests` in all.
//!
//! Contract: every client sends its first request at `start_s`; request ids are
//! `first_id, first_id + 1, ...` in the order requests are sent, and request
//! contents depend only on that order (see [`RequestMaker`]). Client `c` sends
//! to engine `c % num_engines` and tags its requests `client<c>` (plus the
//! maker's group/tenant tag). Finishes of ids this workload did not send are
//! ignored.

use super::contents::RequestMaker;
use super::{Arrival, Workload, WorkloadError};

#[derive(Debug, Clone, PartialEq)]
pub struct ClosedLoopConfig {
    pub clients: usize,
    /// Requests sent in all.
    pub requests: usize,
    /// Delay between a finish and the client's next request.
    pub think_time_s: f64,
    pub num_engines: usize,
    pub first_id: u64,
    pub start_s: f64,
}

impl ClosedLoopConfig {
    /// `clients` clients, `requests` requests, no think time, one engine.
    pub fn new(clients: usize, requests: usize) -> Self {
        Self {
            clients,
            requests,
            think_time_s: 0.0,
            num_engines: 1,
            first_id: 0,
            start_s: 0.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ClosedLoop {
    config: ClosedLoopConfig,
    maker: RequestMaker,
    /// Client of each request sent, indexed by `id - first_id`.
    client_of: Vec<u32>,
}

impl ClosedLoop {
    pub fn new(config: ClosedLoopConfig, maker: RequestMaker) -> Result<Self, WorkloadError> {
        if config.clients == 0 {
            return Err(WorkloadError::invalid(
                "clients",
                0,
                "use at least one client",
            ));
        }
        if config.clients > u32::MAX as usize {
            return Err(WorkloadError::invalid(
                "clients",
                config.clients,
                "use fewer clients",
            ));
        }
        if config.num_engines == 0 {
            return Err(WorkloadError::invalid(
                "num_engines",
                0,
                "use at least one engine",
            ));
        }
        check_time("think_time_s", config.think_time_s)?;
        check_time("start_s", config.start_s)?;
        Ok(Self {
            client_of: Vec::with_capacity(config.requests),
            config,
            maker,
        })
    }

    /// Requests sent so far.
    pub fn sent(&self) -> usize {
        self.client_of.len()
    }

    fn send(&mut self, client: usize, at: f64) -> Arrival {
        let index = self.client_of.len();
        let id = self.config.first_id + index as u64;
        let (request, group_tag) = self.maker.make(index, id, at);
        self.client_of.push(client as u32);
        let tag = if group_tag.is_empty() {
            format!("client{client}")
        } else {
            format!("client{client}/{group_tag}")
        };
        Arrival {
            request,
            engine: client % self.config.num_engines,
            tag,
        }
    }
}

pub(crate) fn check_time(setting: &'static str, value: f64) -> Result<(), WorkloadError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(WorkloadError::invalid(
            setting,
            value,
            "use a finite time >= 0 seconds",
        ))
    }
}

impl Workload for ClosedLoop {
    fn initial(&mut self) -> Vec<Arrival> {
        let first = self.config.clients.min(self.config.requests);
        let start = self.config.start_s;
        (0..first).map(|c| self.send(c, start)).collect()
    }

    fn on_finish(&mut self, id: u64, now: f64) -> Vec<Arrival> {
        let Some(index) = id.checked_sub(self.config.first_id) else {
            return Vec::new();
        };
        let Some(&client) = self.client_of.get(index as usize) else {
            return Vec::new();
        };
        if self.sent() >= self.config.requests {
            return Vec::new();
        }
        vec![self.send(client as usize, now + self.config.think_time_s)]
    }
}
