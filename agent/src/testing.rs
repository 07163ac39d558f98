//! Helpers shared by the crate's unit tests.

/// Whether the test may do what needs root: true as root. Otherwise it prints `SKIP: needs
/// root {what}` and returns false, except under CI (any `CI` variable), which runs the
/// tests as root and must never pass by skipping: there it panics.
pub(crate) fn root_or_skip(what: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var("CI").is_err(),
        "CI must run this as root: it needs root {what}"
    );
    println!("SKIP: needs root {what}");
    false
}
