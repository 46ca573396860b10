//! A fleet of identical replicas behind a request router, as a condition may
//! ask for one.
//!
//! Contract: a [`FleetSpec`] names a replica count (at least 1) and a
//! [`RouterChoice`]; [`RouterChoice::build`] makes the `sim` router it names.
//! A fleet run records each request's replica in its tag, as
//! `<tag>@replica=<index>` ([`tag_with_replica`]), so `requests.csv` shows it
//! and a summary reads it back with [`replica_of_tag`]; runs without a fleet
//! keep their tags as they are. A disaggregated fleet (prefill and decode
//! pools, [`DisaggSpec`]) tags requests with both replicas instead.

mod disagg;

pub use disagg::{placement_of_tag, tag_with_placement, DisaggSpec};

use sim::cluster::{
    AffinityKey, ClusterError, ConversationAffinity, LeastKvUsage, LeastOutstanding,
    PrefixCacheAware, RoundRobin, Router,
};

/// Router names as `router_sweep`'s `routers` parameter spells them.
pub const ROUTER_NAMES: &[&str] = &[
    "round_robin",
    "least_outstanding",
    "least_kv",
    "prefix_aware",
    "affinity",
];

const REPLICA_MARK: &str = "@replica=";

/// Which router spreads a fleet's requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RouterChoice {
    RoundRobin,
    LeastOutstanding,
    LeastKvUsage,
    /// Cached prompt tokens minus `load_weight` per outstanding request.
    PrefixAware {
        load_weight: f64,
    },
    /// Every request with the same cache salt goes to the same replica.
    SaltAffinity,
}

impl RouterChoice {
    /// The router called `name` (one of [`ROUTER_NAMES`]); `prefix_aware`
    /// takes `load_weight`. `None` for an unknown name.
    pub fn from_name(name: &str, load_weight: f64) -> Option<Self> {
        Some(match name {
            "round_robin" => Self::RoundRobin,
            "least_outstanding" => Self::LeastOutstanding,
            "least_kv" => Self::LeastKvUsage,
            "prefix_aware" => Self::PrefixAware { load_weight },
            "affinity" => Self::SaltAffinity,
            _ => return None,
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::RoundRobin => "round_robin",
            Self::LeastOutstanding => "least_outstanding",
            Self::LeastKvUsage => "least_kv",
            Self::PrefixAware { .. } => "prefix_aware",
            Self::SaltAffinity => "affinity",
        }
    }

    /// A fresh router (routers keep state, so one per run).
    pub fn build(&self) -> Result<Box<dyn Router>, ClusterError> {
        Ok(match *self {
            Self::RoundRobin => Box::new(RoundRobin::default()),
            Self::LeastOutstanding => Box::new(LeastOutstanding),
            Self::LeastKvUsage => Box::new(LeastKvUsage),
            Self::PrefixAware { load_weight } => Box::new(PrefixCacheAware::new(load_weight)?),
            Self::SaltAffinity => Box::new(ConversationAffinity::new(AffinityKey::Salt)),
        })
    }
}

/// Replicas of the condition's engine settings behind one router.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetSpec {
    pub replicas: usize,
    pub router: RouterChoice,
}

/// `tag` with the replica that served the request appended.
pub fn tag_with_replica(tag: &str, replica: usize) -> String {
    format!("{tag}{REPLICA_MARK}{replica}")
}

/// The workload's tag and the replica of a fleet run's request tag; `None`
/// for a tag without a replica.
pub fn replica_of_tag(tag: &str) -> Option<(&str, usize)> {
    let (base, replica) = tag.rsplit_once(REPLICA_MARK)?;
    Some((base, replica.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_tags_read_back() {
        let tag = tag_with_replica("t1_g2", 3);
        assert_eq!(tag, "t1_g2@replica=3");
        assert_eq!(replica_of_tag(&tag), Some(("t1_g2", 3)));
        assert_eq!(replica_of_tag("t1_g2"), None);
        assert_eq!(replica_of_tag("x@replica=two"), None);
    }

    #[test]
    fn every_router_name_round_trips() {
        for name in ROUTER_NAMES {
            let choice = RouterChoice::from_name(name, 1.0).expect("known name");
            assert_eq!(choice.name(), *name);
            assert!(choice.build().is_ok());
        }
        assert_eq!(RouterChoice::from_name("random", 1.0), None);
        let bad = RouterChoice::PrefixAware { load_weight: -1.0 };
        assert!(bad.build().is_err());
    }
}
