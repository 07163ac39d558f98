//! The calling thread's network namespace, as the BPF programs name it.

/// Inode of the calling thread's network namespace: what BPF programs record as
/// `net->ns.inum`, to keep events of other namespaces apart.
pub fn current_netns() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata("/proc/thread-self/ns/net").ok()?;
    u32::try_from(meta.ino()).ok()
}
