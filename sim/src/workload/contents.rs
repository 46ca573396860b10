//! What the i-th request of a synthetic workload contains.
//!
//! Contract: [`RequestMaker::make`] is called with indices 0, 1, 2, ... in
//! order and returns the same requests for the same seed and settings, however
//! the run's timing turns out. Shared prefixes are drawn once per group, when
//! the maker is built.

use super::prompts::PromptSource;
use super::WorkloadError;
use engine::Request;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// How prompts are laid out.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptLayout {
    /// Every prompt is `tokens` fresh tokens.
    Unique { tokens: usize },
    /// Request `i` belongs to group `i % groups`: the group's `prefix_tokens`
    /// common tokens, then `unique_tokens` of its own.
    SharedPrefix {
        groups: usize,
        prefix_tokens: usize,
        unique_tokens: usize,
    },
}

impl PromptLayout {
    pub fn prompt_tokens(&self) -> usize {
        match *self {
            Self::Unique { tokens } => tokens,
            Self::SharedPrefix {
                prefix_tokens,
                unique_tokens,
                ..
            } => prefix_tokens + unique_tokens,
        }
    }
}

/// Request `i` belongs to tenant `i % tenants`; with `salted`, each tenant's
/// requests carry the cache salt `tenant-<t>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tenants {
    pub tenants: usize,
    pub salted: bool,
}

/// Makes request contents: prompt, output length, salt and a tag naming the
/// request's group and tenant.
#[derive(Debug, Clone)]
pub struct RequestMaker {
    source: PromptSource,
    layout: PromptLayout,
    output_tokens: usize,
    tenants: Option<Tenants>,
    rng: StdRng,
    prefixes: Vec<Vec<u32>>,
}

impl RequestMaker {
    pub fn new(
        source: PromptSource,
        layout: PromptLayout,
        output_tokens: usize,
        seed: u64,
    ) -> Result<Self, WorkloadError> {
        if layout.prompt_tokens() == 0 {
            return Err(WorkloadError::invalid(
                "prompt tokens",
                0,
                "prompts need at least one token",
            ));
        }
        if output_tokens == 0 {
            return Err(WorkloadError::invalid(
                "output_tokens",
                0,
                "ask for at least one output token",
            ));
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let prefixes = match layout {
            PromptLayout::Unique { .. } => Vec::new(),
            PromptLayout::SharedPrefix {
                groups,
                prefix_tokens,
                ..
            } => {
                if groups == 0 {
                    return Err(WorkloadError::invalid(
                        "groups",
                        0,
                        "a shared-prefix layout needs at least one group",
                    ));
                }
                (0..groups)
                    .map(|_| source.make(&mut rng, prefix_tokens))
                    .collect()
            }
        };
        Ok(Self {
            source,
            layout,
            output_tokens,
            tenants: None,
            rng,
            prefixes,
        })
    }

    /// Spreads requests over tenants (see [`Tenants`]).
    pub fn with_tenants(mut self, tenants: Tenants) -> Result<Self, WorkloadError> {
        if tenants.tenants == 0 {
            return Err(WorkloadError::invalid(
                "tenants",
                0,
                "use at least one tenant",
            ));
        }
        self.tenants = Some(tenants);
        Ok(self)
    }

    pub fn layout(&self) -> &PromptLayout {
        &self.layout
    }

    /// The `index`-th request, with id `id`, arriving at `arrival_s`, and its
    /// tag part (`g<group>` and/or `t<tenant>`, joined by `/`; empty if neither).
    pub fn make(&mut self, index: usize, id: u64, arrival_s: f64) -> (Request, String) {
        let mut tag = String::new();
        let prompt = match self.layout {
            PromptLayout::Unique { tokens } => self.source.make(&mut self.rng, tokens),
            PromptLayout::SharedPrefix {
                groups,
                prefix_tokens,
                unique_tokens,
            } => {
                let group = index % groups;
                let mut p = Vec::with_capacity(prefix_tokens + unique_tokens);
                p.extend_from_slice(&self.prefixes[group]);
                self.source.fill(&mut self.rng, unique_tokens, &mut p);
                tag.push_str(&format!("g{group}"));
                p
            }
        };
        let mut request = Request::new(id, prompt, self.output_tokens);
        request.arrival_time = arrival_s;
        if let Some(t) = self.tenants {
            let tenant = index % t.tenants;
            if !tag.is_empty() {
                tag.push('/');
            }
            tag.push_str(&format!("t{tenant}"));
            if t.salted {
                request.cache_salt = Some(format!("tenant-{tenant}"));
            }
        }
        (request, tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maker(layout: PromptLayout) -> RequestMaker {
        RequestMaker::new(PromptSource::random_tokens(1000).unwrap(), layout, 4, 7).unwrap()
    }

    #[test]
    fn shared_prefix_groups_share_exactly_the_prefix() {
        let layout = PromptLayout::SharedPrefix {
            groups: 2,
            prefix_tokens: 32,
            unique_tokens: 8,
        };
        let mut m = maker(layout);
        let reqs: Vec<_> = (0..4).map(|i| m.make(i, i as u64, 0.0)).collect();
        let p = |i: usize| &reqs[i].0.prompt_token_ids;
        assert_eq!(p(0).len(), 40);
        assert_eq!(p(0)[..32], p(2)[..32]);
        assert_ne!(p(0)[32..], p(2)[32..]);
        assert_ne!(p(0)[..32], p(1)[..32]);
        assert_eq!(reqs[1].1, "g1");
    }

    #[test]
    fn salted_tenants_get_their_own_salt() {
        let mut m = maker(PromptLayout::Unique { tokens: 5 })
            .with_tenants(Tenants {
                tenants: 3,
                salted: true,
            })
            .unwrap();
        let (r4, tag4) = m.make(4, 4, 1.5);
        assert_eq!(r4.cache_salt.as_deref(), Some("tenant-1"));
        assert_eq!(tag4, "t1");
        assert_eq!(r4.arrival_time, 1.5);
        let mut unsalted = maker(PromptLayout::Unique { tokens: 5 })
            .with_tenants(Tenants {
                tenants: 3,
                salted: false,
            })
            .unwrap();
        assert_eq!(unsalted.make(0, 0, 0.0).0.cache_salt, None);
    }

    #[test]
    fn same_seed_same_requests_and_bad_settings_are_rejected() {
        let layout = PromptLayout::Unique { tokens: 16 };
        let (a, b) = (&mut maker(layout.clone()), &mut maker(layout.clone()));
        assert_eq!(a.make(0, 0, 0.0), b.make(0, 0, 0.0));
        let src = PromptSource::default();
        assert!(RequestMaker::new(src.clone(), PromptLayout::Unique { tokens: 0 }, 1, 0).is_err());
        assert!(RequestMaker::new(src.clone(), layout, 0, 0).is_err());
        let no_groups = PromptLayout::SharedPrefix {
            groups: 0,
            prefix_tokens: 4,
            unique_tokens: 4,
        };
        assert!(RequestMaker::new(src, no_groups, 1, 0).is_err());
    }
}
