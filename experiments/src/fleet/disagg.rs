//! A disaggregated fleet, as a condition may ask for one: a prefill pool and
//! a decode pool of the condition's engine, joined by a KV link.
//!
//! Contract: a [`DisaggSpec`] has at least one replica in each pool (else
//! [`DisaggSpec::new`] refuses it), a router per pool and a valid
//! `sim::cluster::KvLink`. A disaggregated run records where each request
//! ran in its tag, as `<tag>@prefill=<p>@decode=<d>` (`-` for a request that
//! finished on its prefill replica; [`tag_with_placement`]), read back by
//! [`placement_of_tag`].

use super::RouterChoice;
use sim::cluster::{KvLink, Placement};

const PREFILL_MARK: &str = "@prefill=";
const DECODE_MARK: &str = "@decode=";

/// Prefill and decode replicas of the condition's engine settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DisaggSpec {
    prefill: usize,
    decode: usize,
    pub prefill_router: RouterChoice,
    pub decode_router: RouterChoice,
    pub link: KvLink,
}

impl DisaggSpec {
    /// `None` when a pool would be empty.
    pub fn new(
        prefill: usize,
        decode: usize,
        (prefill_router, decode_router): (RouterChoice, RouterChoice),
        link: KvLink,
    ) -> Option<Self> {
        (prefill > 0 && decode > 0).then_some(Self {
            prefill,
            decode,
            prefill_router,
            decode_router,
            link,
        })
    }

    pub fn prefill(&self) -> usize {
        self.prefill
    }

    pub fn decode(&self) -> usize {
        self.decode
    }

    /// Engines in both pools.
    pub fn replicas(&self) -> usize {
        self.prefill + self.decode
    }

    /// `1P3D` for one prefill and three decode replicas.
    pub fn split_name(&self) -> String {
        format!("{}P{}D", self.prefill, self.decode)
    }
}

/// `tag` with where the request ran appended.
pub fn tag_with_placement(tag: &str, placement: &Placement) -> String {
    let decode = placement
        .decode
        .map_or_else(|| "-".to_string(), |d| d.to_string());
    format!(
        "{tag}{PREFILL_MARK}{}{DECODE_MARK}{decode}",
        placement.prefill
    )
}

/// The workload's tag and where the request ran, from a disaggregated run's
/// request tag; `None` for a tag without a placement.
pub fn placement_of_tag(tag: &str) -> Option<(&str, Placement)> {
    let (rest, decode) = tag.rsplit_once(DECODE_MARK)?;
    let (base, prefill) = rest.rsplit_once(PREFILL_MARK)?;
    let decode = match decode {
        "-" => None,
        d => Some(d.parse().ok()?),
    };
    let prefill = prefill.parse().ok()?;
    Some((base, Placement { prefill, decode }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_tags_read_back() {
        for decode in [Some(2), None] {
            let placement = Placement { prefill: 1, decode };
            let tag = tag_with_placement("long", &placement);
            assert_eq!(placement_of_tag(&tag), Some(("long", placement)));
        }
        assert_eq!(
            tag_with_placement(
                "x",
                &Placement {
                    prefill: 0,
                    decode: Some(3)
                }
            ),
            "x@prefill=0@decode=3"
        );
        assert_eq!(placement_of_tag("long"), None);
        assert_eq!(placement_of_tag("x@prefill=a@decode=1"), None);
    }

    #[test]
    fn both_pools_need_a_replica() {
        let routers = (RouterChoice::LeastOutstanding, RouterChoice::RoundRobin);
        let link = KvLink::instant();
        assert!(DisaggSpec::new(0, 3, routers, link).is_none());
        assert!(DisaggSpec::new(3, 0, routers, link).is_none());
        let spec = DisaggSpec::new(1, 3, routers, link).expect("valid");
        assert_eq!((spec.replicas(), spec.split_name()), (4, "1P3D".into()));
    }
}
