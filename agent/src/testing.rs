//! Helpers shared by the crate's unit tests: skipping without root, a network namespace of
//! a test's own ([`in_new_netns`], [`ip`]), and counting what a thread allocates
//! ([`peak_bytes`]).

/// Runs `body` to completion on a thread of its own, in a new network namespace, on a
/// current-thread tokio runtime; a panic there fails the caller.
pub(crate) fn in_new_netns<F, Fut>(body: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(body());
    })
    .join()
    .expect("the namespace's thread failed");
}

/// Runs `ip ARGS` (the test's own tool) in the calling thread's namespace; panics unless it
/// succeeds.
pub(crate) fn ip(args: &str) {
    let ok = std::process::Command::new("ip")
        .args(args.split_whitespace())
        .status()
        .expect("run ip");
    assert!(ok.success(), "ip {args} failed");
}

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

/// How much memory the calling thread allocates at most while it runs `f`, in bytes above
/// what it held before: the crate's unit tests count every allocation per thread (each test
/// runs on a thread of its own), so a test can bound what a computation holds at its peak.
pub(crate) fn peak_bytes<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = alloc_count::LIVE.with(std::cell::Cell::get);
    alloc_count::PEAK.with(|p| p.set(start));
    let out = f();
    let peak = alloc_count::PEAK.with(std::cell::Cell::get);
    (out, usize::try_from(peak - start).unwrap_or(0))
}

/// The counting allocator of the unit tests: the system's, plus per-thread totals.
mod alloc_count {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        /// Bytes this thread allocated minus those it freed (negative when it frees what
        /// another thread allocated).
        pub(super) static LIVE: Cell<isize> = const { Cell::new(0) };
        /// The largest `LIVE` since `peak_bytes` began.
        pub(super) static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn count(delta: isize) {
        // `try_with`: nothing to count in a thread whose locals are gone (its exit).
        let _ = LIVE.try_with(|live| {
            let now = live.get() + delta;
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
    }

    fn size(layout: Layout) -> isize {
        isize::try_from(layout.size()).unwrap_or(isize::MAX)
    }

    struct Counting;

    // SAFETY: every method forwards to the system allocator with the caller's arguments
    // unchanged (so its contract is the caller's); counting touches only thread-locals
    // that need no allocation (const-initialised `Cell`s without destructors).
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded as received (see the impl).
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                count(size(layout));
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded as received (see the impl).
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                count(size(layout));
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: forwarded as received (see the impl).
            unsafe { System.dealloc(ptr, layout) };
            count(-size(layout));
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: forwarded as received (see the impl).
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                count(isize::try_from(new_size).unwrap_or(isize::MAX) - size(layout));
            }
            p
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;
}
