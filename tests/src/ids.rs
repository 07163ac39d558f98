//! Unique names for namespaces and interfaces.
//!
//! Names embed the creating process id so that parallel test binaries never
//! collide and so that leftovers of a killed run can be recognised (see
//! [`crate::netns::cleanup_stale`]).

use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Fixed width of the base-36 pid field in interface names (36^5 > pid_max).
pub(crate) const PID36_WIDTH: usize = 5;

fn next() -> u64 {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

fn base36(mut n: u64, min_width: usize) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 || out.is_empty() {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
    }
    while out.len() < min_width {
        out.push(b'0');
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// Network namespace name: `nd-<pid hex>-<counter>`.
pub(crate) fn netns_name() -> String {
    format!("nd-{:x}-{}", std::process::id(), next())
}

/// Interface name `<prefix><pid base36, 5 chars><counter base36>`, at most 15
/// bytes for prefixes of up to 4 bytes.
pub(crate) fn ifname(prefix: &str) -> String {
    format!(
        "{prefix}{}{}",
        base36(u64::from(std::process::id()), PID36_WIDTH),
        base36(next(), 1)
    )
}

/// Extracts the pid from a name made by [`ifname`] with `prefix`.
pub(crate) fn pid_from_ifname(prefix: &str, name: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?.get(..PID36_WIDTH)?;
    u32::from_str_radix(digits, 36).ok()
}

/// Extracts the pid from a name made by [`netns_name`].
pub(crate) fn pid_from_netns_name(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("nd-")?;
    let (pid, counter) = rest.split_once('-')?;
    counter.parse::<u64>().ok()?;
    u32::from_str_radix(pid, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let ns = netns_name();
        assert_eq!(pid_from_netns_name(&ns), Some(std::process::id()));
        let wg = ifname("ndwg");
        assert!(wg.len() <= 15, "{wg} too long");
        assert_eq!(pid_from_ifname("ndwg", &wg), Some(std::process::id()));
        assert_eq!(base36(4_194_304, PID36_WIDTH).len(), PID36_WIDTH);
        assert_eq!(pid_from_netns_name("nd-zz-1"), None);
        assert_eq!(pid_from_netns_name("other"), None);
    }
}
