//! Scripted: an explicit list of requests, each arriving at a given time or a
//! given delay after another request finishes.
//!
//! Contract: every entry arrives exactly once. [`Scripted::new`] rejects
//! duplicate ids, triggers on ids not in the script, negative or non-finite
//! times, and entries that can never arrive (a chain of `AfterFinish` that
//! never reaches an `At`). The arrival's `request.arrival_time` is set to the
//! moment it is due; what the entry's request had there is ignored.

use super::{Arrival, Workload, WorkloadError};
use engine::Request;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// At this absolute time (seconds on the run's clock).
    At(f64),
    /// `delay_s` after request `id` finishes.
    AfterFinish { id: u64, delay_s: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScriptEntry {
    pub request: Request,
    pub tag: String,
    pub engine: usize,
    pub trigger: Trigger,
}

impl ScriptEntry {
    /// An entry for engine 0.
    pub fn new(request: Request, tag: impl Into<String>, trigger: Trigger) -> Self {
        Self {
            request,
            tag: tag.into(),
            engine: 0,
            trigger,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Scripted {
    at: Vec<Arrival>,
    /// Entries waiting for a request to finish, keyed by that request's id.
    after: HashMap<u64, Vec<(f64, Arrival)>>,
}

impl Scripted {
    pub fn new(entries: Vec<ScriptEntry>) -> Result<Self, WorkloadError> {
        let mut trigger_of: HashMap<u64, Trigger> = HashMap::with_capacity(entries.len());
        for e in &entries {
            let id = e.request.id.0;
            let time = match e.trigger {
                Trigger::At(t) => t,
                Trigger::AfterFinish { delay_s, .. } => delay_s,
            };
            if !(time.is_finite() && time >= 0.0) {
                return Err(WorkloadError::script(
                    id,
                    format!("time {time} must be finite and >= 0"),
                ));
            }
            if trigger_of.insert(id, e.trigger).is_some() {
                return Err(WorkloadError::script(
                    id,
                    "appears twice; ids must be unique",
                ));
            }
        }
        // In script order, so the error names the first bad entry.
        for e in &entries {
            let id = e.request.id.0;
            let mut current = e.trigger;
            let mut hops = 0;
            while let Trigger::AfterFinish { id: parent, .. } = current {
                current = *trigger_of.get(&parent).ok_or_else(|| {
                    WorkloadError::script(
                        id,
                        format!("waits for request {parent}, which is not in the script"),
                    )
                })?;
                hops += 1;
                if hops > trigger_of.len() {
                    return Err(WorkloadError::script(
                        id,
                        "never arrives: its AfterFinish chain loops without reaching an At trigger",
                    ));
                }
            }
        }
        let mut at = Vec::new();
        let mut after: HashMap<u64, Vec<(f64, Arrival)>> = HashMap::new();
        for e in entries {
            let arrival = Arrival {
                request: e.request,
                engine: e.engine,
                tag: e.tag,
            };
            match e.trigger {
                Trigger::At(t) => {
                    let mut arrival = arrival;
                    arrival.request.arrival_time = t;
                    at.push(arrival);
                }
                Trigger::AfterFinish { id, delay_s } => {
                    after.entry(id).or_default().push((delay_s, arrival))
                }
            }
        }
        Ok(Self { at, after })
    }
}

impl Workload for Scripted {
    fn initial(&mut self) -> Vec<Arrival> {
        std::mem::take(&mut self.at)
    }

    fn on_finish(&mut self, id: u64, now: f64) -> Vec<Arrival> {
        let Some(waiting) = self.after.remove(&id) else {
            return Vec::new();
        };
        waiting
            .into_iter()
            .map(|(delay, mut arrival)| {
                arrival.request.arrival_time = now + delay;
                arrival
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, trigger: Trigger) -> ScriptEntry {
        ScriptEntry::new(
            Request::new(id, vec![1, 2, 3], 2),
            format!("r{id}"),
            trigger,
        )
    }

    #[test]
    fn after_finish_entries_arrive_after_their_trigger() {
        let mut s = Scripted::new(vec![
            entry(0, Trigger::At(0.5)),
            entry(
                1,
                Trigger::AfterFinish {
                    id: 0,
                    delay_s: 0.25,
                },
            ),
            entry(
                2,
                Trigger::AfterFinish {
                    id: 1,
                    delay_s: 0.0,
                },
            ),
        ])
        .unwrap();
        let first = s.initial();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].request.arrival_time, 0.5);
        assert!(s.on_finish(7, 1.0).is_empty());
        let next = s.on_finish(0, 2.0);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].request.id.0, 1);
        assert_eq!(next[0].request.arrival_time, 2.25);
        assert!(s.on_finish(0, 3.0).is_empty(), "each entry arrives once");
    }

    #[test]
    fn bad_scripts_are_rejected_naming_the_request() {
        let missing = Scripted::new(vec![entry(
            4,
            Trigger::AfterFinish {
                id: 9,
                delay_s: 0.0,
            },
        )]);
        let err = missing.unwrap_err().to_string();
        assert!(err.contains("request 4") && err.contains("9"), "{err}");
        let cycle = Scripted::new(vec![
            entry(
                1,
                Trigger::AfterFinish {
                    id: 2,
                    delay_s: 0.0,
                },
            ),
            entry(
                2,
                Trigger::AfterFinish {
                    id: 1,
                    delay_s: 0.0,
                },
            ),
        ]);
        assert!(cycle.unwrap_err().to_string().contains("never arrives"));
        let dup = Scripted::new(vec![entry(1, Trigger::At(0.0)), entry(1, Trigger::At(1.0))]);
        assert!(dup.unwrap_err().to_string().contains("twice"));
        let negative = Scripted::new(vec![entry(1, Trigger::At(-1.0))]);
        assert!(negative.is_err());
    }
}
