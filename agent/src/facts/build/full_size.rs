//! Full-size segments: those the interface's MTU limits, read from the data plane's size
//! histogram. The histogram counts segments (GSO-aware) by IP length in buckets
//! ([`SIZE_BUCKET_BOUNDS`]); a segment on the interface is at most its MTU long, so the
//! bucket holding the MTU counts the segments from the bound below it up to the MTU:
//! 577-1280 bytes at Tailscale's 1280, 1421-1440 at 1440, 1481-1500 at 1500.

use crate::kernel::packet::counters::{DirCounters, IfaceCounters, SIZE_BUCKET_BOUNDS};

/// What `traffic.full_size_segments` and `traffic.full_size_share` say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct FullSize {
    /// Segments at (the size bucket of) the MTU, in the direction that carried more.
    pub segments: i64,
    /// Their share of that direction's segments, 0.0 to 1.0.
    pub share: f64,
}

/// The full-size segments of the direction of `c` that carried more of them, on an
/// interface of MTU `mtu`.
pub(super) fn full_size(c: &IfaceCounters, mtu: u32) -> FullSize {
    let bucket = SIZE_BUCKET_BOUNDS
        .iter()
        .position(|b| *b >= mtu)
        .unwrap_or(SIZE_BUCKET_BOUNDS.len());
    let at = |d: &DirCounters| d.size_buckets.get(bucket).copied().unwrap_or(0);
    let (full, all) = [&c.egress, &c.ingress]
        .into_iter()
        .map(|d| (at(d), d.segments))
        .max_by_key(|(full, _)| *full)
        .unwrap_or((0, 0));
    FullSize {
        segments: i64::try_from(full).unwrap_or(i64::MAX),
        share: if all > 0 {
            (full as f64 / all as f64).min(1.0)
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Segments per bucket of one direction (indexes of `SIZE_BUCKET_BOUNDS`, the last one
    /// beyond them), and the direction's segment count their sum.
    fn dir(buckets: &[(usize, u64)]) -> DirCounters {
        let mut d = DirCounters {
            size_buckets: vec![0; SIZE_BUCKET_BOUNDS.len() + 1],
            ..DirCounters::default()
        };
        for (i, n) in buckets {
            d.size_buckets[*i] += n;
            d.segments += n;
        }
        d
    }

    #[test]
    fn the_busier_direction_at_the_mtu_counts() {
        // 1280: bucket 1 (577-1280). A bulk upload: 9,000 full-size segments out, 1,000
        // short ones; its ACKs in.
        let c = IfaceCounters {
            egress: dir(&[(1, 9000), (0, 1000)]),
            ingress: dir(&[(0, 5000)]),
        };
        let f = full_size(&c, 1280);
        assert_eq!(f.segments, 9000);
        assert!((f.share - 0.9).abs() < 1e-9, "{f:?}");
        // The same counters on a 1440 interface: nothing in 1421-1440.
        assert_eq!(full_size(&c, 1440).segments, 0);
    }

    #[test]
    fn mtus_between_and_beyond_the_bounds_use_their_bucket() {
        // 1400 lies in 1381-1420 (bucket 3), 9000 in 1501-9000 (bucket 8), 65535 beyond.
        let c = IfaceCounters {
            egress: dir(&[(3, 700), (8, 30), (9, 4)]),
            ingress: dir(&[(3, 100)]),
        };
        assert_eq!(full_size(&c, 1400).segments, 700);
        assert_eq!(full_size(&c, 9000).segments, 30);
        assert_eq!(full_size(&c, 65535).segments, 4);
        // No traffic: nothing, and no division by zero.
        let idle = full_size(&IfaceCounters::default(), 1280);
        assert_eq!((idle.segments, idle.share), (0, 0.0));
    }
}
