//! Skip-or-fail requirement checks.
//!
//! On a developer machine without root, capabilities or tools, lab tests
//! print `SKIP: <reason>` and return early. When the environment variable
//! `CI` is `true` (or `1`), a missing requirement panics instead, so CI can
//! never pass by silently skipping.
//!
//! A lab test starts with [`lab_guard!`](crate::lab_guard), which returns early (after the
//! `SKIP:` line) when the lab cannot run here:
//!
//! ```no_run
//! #[test]
//! fn my_lab_test() -> anyhow::Result<()> {
//!     netdoctor_lab::lab_guard!("iperf3", "nft");
//!     // ... build a topology ...
//!     Ok(())
//! }
//! ```

use std::path::Path;

/// Linux capability numbers (see `capability.h`).
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Tools every lab topology needs.
const BASE_TOOLS: &[&str] = &["ip", "nsenter"];

/// True when running in CI (`CI=true` or `CI=1`, case-insensitive).
pub fn is_ci() -> bool {
    std::env::var("CI")
        .map(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
        .unwrap_or(false)
}

/// Reports a missing requirement: panics in CI, otherwise prints
/// `SKIP: <reason>` and returns `false` (so `return skip(..)`-style early exits
/// read naturally).
///
/// # Panics
/// When [`is_ci`] is true.
pub fn skip(reason: &str) -> bool {
    if is_ci() {
        panic!("lab requirement missing in CI (CI=true), refusing to skip: {reason}");
    }
    println!("SKIP: {reason}");
    false
}

/// Checks that namespaces and veths can be built: effective uid 0,
/// CAP_NET_ADMIN + CAP_SYS_ADMIN, and `ip` + `nsenter` on PATH.
///
/// Returns `true` when the test may proceed; otherwise skips (see [`skip`]).
///
/// # Panics
/// When a requirement is missing and [`is_ci`] is true.
pub fn require_root_or_skip() -> bool {
    match missing_root() {
        Some(reason) => skip(&reason),
        None => true,
    }
}

/// Like [`require_root_or_skip`], plus what loading BPF needs: CAP_BPF,
/// CAP_PERFMON and kernel BTF at `/sys/kernel/btf/vmlinux`.
///
/// # Panics
/// When a requirement is missing and [`is_ci`] is true.
pub fn require_bpf_or_skip() -> bool {
    if let Some(reason) = missing_root() {
        return skip(&reason);
    }
    if let Some(reason) = missing_caps(&[(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]) {
        return skip(&reason);
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return skip("kernel BTF (/sys/kernel/btf/vmlinux) not available");
    }
    true
}

/// What a lab test that builds namespaces but loads no BPF needs: root and namespaces
/// ([`require_root_or_skip`]), and every program in `tools` on PATH.
///
/// # Panics
/// When a requirement is missing and [`is_ci`] is true.
pub fn netns_ready(tools: &[&str]) -> bool {
    require_root_or_skip() && require_tools_or_skip(tools)
}

/// What a lab test that loads BPF needs: root and namespaces, CAP_BPF, CAP_PERFMON and
/// kernel BTF ([`require_bpf_or_skip`]), and every program in `tools` on PATH.
///
/// # Panics
/// When a requirement is missing and [`is_ci`] is true.
pub fn lab_ready(tools: &[&str]) -> bool {
    require_bpf_or_skip() && require_tools_or_skip(tools)
}

/// Returns early from a lab test when the lab cannot run here: prints `SKIP: <reason>` on a
/// developer machine, panics under `CI=true` (see [`skip`]).
///
/// - `lab_guard!()`, `lab_guard!("iperf3", "nft")`: [`lab_ready`] (root, namespaces, BPF)
///   and the tools named;
/// - `lab_guard!(tools = TOOLS)`: [`lab_ready`] with a `&[&str]` the test already has;
/// - `lab_guard!(netns)`, `lab_guard!(netns: "iperf3")`: [`netns_ready`], for a test that
///   loads no BPF.
///
/// The early return is [`Skipped::skipped`]: `()` or `Ok(())`, whichever the test returns.
#[macro_export]
macro_rules! lab_guard {
    (netns $(: $($tool:expr),+ $(,)?)?) => {
        if !$crate::ci::netns_ready(&[$($($tool),+)?]) {
            return $crate::ci::Skipped::skipped();
        }
    };
    (tools = $tools:expr) => {
        if !$crate::ci::lab_ready($tools) {
            return $crate::ci::Skipped::skipped();
        }
    };
    ($($tool:expr),* $(,)?) => {
        if !$crate::ci::lab_ready(&[$($tool),*]) {
            return $crate::ci::Skipped::skipped();
        }
    };
}

/// What a skipped test returns: [`lab_guard!`](crate::lab_guard)'s early return, for tests
/// returning `()` and tests returning `Result<(), E>`.
pub trait Skipped {
    /// The value of a test that did not run.
    fn skipped() -> Self;
}

impl Skipped for () {
    fn skipped() -> Self {}
}

impl<E> Skipped for Result<(), E> {
    fn skipped() -> Self {
        Ok(())
    }
}

/// Checks that every program in `tools` is on PATH (e.g.
/// `&["wireguard-go", "wg", "iperf3", "nft", "ping"]`).
///
/// # Panics
/// When a tool is missing and [`is_ci`] is true.
pub fn require_tools_or_skip(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !on_path(t)).collect();
    if missing.is_empty() {
        true
    } else {
        skip(&format!("missing tools on PATH: {}", missing.join(", ")))
    }
}

/// True when an executable named `tool` is found in one of PATH's directories.
pub fn on_path(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(tool))
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

fn missing_root() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("lab tests need root (effective uid 0)".to_owned());
    }
    if let Some(reason) = missing_caps(&[
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
    ]) {
        return Some(reason);
    }
    let missing: Vec<&str> = BASE_TOOLS.iter().copied().filter(|t| !on_path(t)).collect();
    if !missing.is_empty() {
        return Some(format!("missing tools on PATH: {}", missing.join(", ")));
    }
    None
}

fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

fn missing_caps(caps: &[(u32, &str)]) -> Option<String> {
    let Some(eff) = effective_caps() else {
        return Some("cannot read effective capabilities from /proc/self/status".to_owned());
    };
    let missing: Vec<&str> = caps
        .iter()
        .filter(|(bit, _)| eff & (1u64 << bit) == 0)
        .map(|(_, name)| *name)
        .collect();
    if missing.is_empty() {
        None
    } else {
        Some(format!("missing capabilities: {}", missing.join(", ")))
    }
}
