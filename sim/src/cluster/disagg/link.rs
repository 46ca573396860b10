//! The link a prefill replica sends KV over.
//!
//! Contract: a [`KvLink`] has a bandwidth in bytes/s (above 0;
//! `f64::INFINITY` is accepted and means no time per byte) and a latency in
//! seconds (finite, 0 or more); anything else is refused with
//! [`ClusterError`]. Sending `bytes`
//! takes `latency + bytes / bandwidth` seconds. Each prefill replica has one
//! outbound link ([`LinkQueue`]) that carries one transfer at a time, in the
//! order the prefills finish: a transfer starts when its prefill has finished
//! and the replica's previous transfer has arrived.

use crate::cluster::ClusterError;

/// Bandwidth and latency of the KV link between the pools.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvLink {
    bandwidth_bytes_per_s: f64,
    latency_s: f64,
}

impl KvLink {
    pub fn new(bandwidth_bytes_per_s: f64, latency_s: f64) -> Result<Self, ClusterError> {
        if bandwidth_bytes_per_s.is_nan() || bandwidth_bytes_per_s <= 0.0 {
            return Err(ClusterError::BadLinkBandwidth(bandwidth_bytes_per_s));
        }
        if !latency_s.is_finite() || latency_s < 0.0 {
            return Err(ClusterError::BadLinkLatency(latency_s));
        }
        Ok(Self {
            bandwidth_bytes_per_s,
            latency_s,
        })
    }

    /// A link that takes no time: infinite bandwidth, no latency.
    pub fn instant() -> Self {
        Self {
            bandwidth_bytes_per_s: f64::INFINITY,
            latency_s: 0.0,
        }
    }

    pub fn bandwidth_bytes_per_s(&self) -> f64 {
        self.bandwidth_bytes_per_s
    }

    pub fn latency_s(&self) -> f64 {
        self.latency_s
    }

    /// Seconds to send `bytes`: latency plus bytes over bandwidth.
    pub fn transfer_seconds(&self, bytes: u64) -> f64 {
        // bytes / inf is 0: an infinite link costs its latency alone.
        self.latency_s + bytes as f64 / self.bandwidth_bytes_per_s
    }
}

/// When each prefill replica's link is next free.
#[derive(Debug, Clone)]
pub(super) struct LinkQueue {
    link: KvLink,
    free_at: Vec<f64>,
}

impl LinkQueue {
    pub(super) fn new(link: KvLink, replicas: usize, start: f64) -> Self {
        Self {
            link,
            free_at: vec![start; replicas],
        }
    }

    /// Books a transfer of `bytes` from `replica`, ready at `ready`:
    /// returns its (start, arrival) times.
    pub(super) fn send(&mut self, replica: usize, ready: f64, bytes: u64) -> (f64, f64) {
        let start = ready.max(self.free_at[replica]);
        let end = start + self.link.transfer_seconds(bytes);
        self.free_at[replica] = end;
        (start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_time_is_latency_plus_bytes_over_bandwidth() {
        let link = KvLink::new(1e9, 2e-3).expect("valid");
        assert_eq!(link.transfer_seconds(0), 2e-3);
        assert_eq!(link.transfer_seconds(500_000_000), 2e-3 + 0.5);
        assert_eq!(KvLink::instant().transfer_seconds(u64::MAX), 0.0);
        let fast = KvLink::new(f64::INFINITY, 1e-4).expect("infinite bandwidth");
        assert_eq!(fast.transfer_seconds(1 << 40), 1e-4);
    }

    #[test]
    fn bad_bandwidth_and_latency_are_refused() {
        for bw in [0.0, -1.0, f64::NEG_INFINITY] {
            assert_eq!(
                KvLink::new(bw, 0.0),
                Err(ClusterError::BadLinkBandwidth(bw))
            );
        }
        assert!(matches!(
            KvLink::new(f64::NAN, 0.0),
            Err(ClusterError::BadLinkBandwidth(b)) if b.is_nan()
        ));
        for lat in [-1e-6, f64::INFINITY] {
            assert_eq!(
                KvLink::new(1e9, lat),
                Err(ClusterError::BadLinkLatency(lat))
            );
        }
        assert!(matches!(
            KvLink::new(1e9, f64::NAN),
            Err(ClusterError::BadLinkLatency(l)) if l.is_nan()
        ));
        let msg = ClusterError::BadLinkBandwidth(0.0).to_string();
        assert!(msg.contains("> 0") && msg.contains("INFINITY"), "{msg}");
    }

    #[test]
    fn one_replica_sends_one_transfer_at_a_time() {
        let mut q = LinkQueue::new(KvLink::new(1e3, 1.0).expect("valid"), 2, 0.0);
        assert_eq!(q.send(0, 0.0, 1000), (0.0, 2.0));
        // Ready before the first has arrived: waits for it.
        assert_eq!(q.send(0, 0.5, 1000), (2.0, 4.0));
        // Another replica's link is its own.
        assert_eq!(q.send(1, 0.5, 0), (0.5, 1.5));
        // Ready after the link is free: starts at once.
        assert_eq!(q.send(0, 10.0, 0), (10.0, 11.0));
    }
}
