//! The CPU arithmetic on real /proc data: a busy child measured against the kernel's own
//! nanosecond count, a thread that exits during the window, a name made to look like
//! fields, the limits from threads, affinity and a cgroup quota the test sets.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use super::limit::{cgroup_quota, cpu_cgroup, mount_of, Hierarchy};
use super::procfs::{parse_host, parse_stat, stat};
use super::*;

/// A child that is stopped and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(script: &str) -> Reaped {
    Reaped(
        Command::new("sh")
            .args(["-c", script])
            .spawn()
            .expect("spawn sh"),
    )
}

/// Nanoseconds the (single-threaded) process `pid` spent on a CPU: `/proc/PID/schedstat`,
/// the scheduler's own count, independent of the tick-based `stat` times.
fn on_cpu_ns(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).expect("schedstat");
    text.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("schedstat's first field")
}

#[test]
fn parses_stat_lines_whatever_the_name() {
    let line = "4242 (x) R 1 2 3 4 5) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                250 70 0 0 20 0 3 0 123456 0 0";
    let s = parse_stat(line).expect("parses");
    assert_eq!(
        s,
        procfs::TaskStat {
            ticks: 320,
            threads: 3,
            start_time: 123456
        }
    );
    assert_eq!(parse_stat("4242 (x) S 1 2"), None);
    let host = parse_host("cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 1 2 3 4 5 6 7 8 9 0\n")
        .expect("cpu line");
    assert_eq!((host.busy, host.total), (170, 990));
    let later = HostSample {
        busy: host.busy + 150,
        total: host.total + 200,
    };
    assert_eq!(host.busy_percent(&later), Some(75.0));
    assert_eq!(host.busy_percent(&host), None);
    assert_eq!(parse_host("intr 1 2 3\n"), None);
}

/// A thread of this process names itself so that its stat line seems to have other
/// fields: they are still read where the kernel put them.
#[test]
fn a_name_that_looks_like_fields_shifts_none() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        std::fs::write("/proc/thread-self/comm", "x) Z 1 2 3 4 5").expect("rename thread");
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        tx.send(tid).expect("send tid");
        let _ = done_rx.recv();
    });
    let tid = rx.recv().expect("tid");
    let path = PathBuf::from(format!("/proc/self/task/{tid}/stat"));
    let raw = std::fs::read_to_string(&path).expect("thread stat");
    let parsed = stat(&path).expect("parses despite its name");
    let whole = stat(Path::new("/proc/self/stat")).expect("own stat");
    done_tx.send(()).expect("release worker");
    worker.join().expect("worker");
    assert!(raw.contains("(x) Z 1 2 3 4 5)"), "{raw}");
    // A thread's line gives its process's thread count (this one and the test's, at
    // least) and a start no earlier than its process's; split at the first ')' it would
    // read the name's "Z 1 2 3 4 5" as the fields.
    assert!(parsed.threads >= 2, "{parsed:?}");
    assert!(
        parsed.start_time >= whole.start_time,
        "{parsed:?} {whole:?}"
    );
    let after_first = raw.find(')').map(|at| &raw[at + 1..]).unwrap_or_default();
    let naive_start: Option<u64> = after_first
        .split_whitespace()
        .nth(22 - 3)
        .and_then(|f| f.parse().ok());
    assert_ne!(
        naive_start,
        Some(parsed.start_time),
        "the first ')' would mislead a parser"
    );
}

/// A busy child measured over a second: its percent of one core from clock ticks agrees
/// with the scheduler's nanosecond count over the same readings.
#[test]
fn ticks_become_percent_of_one_core() {
    let child = spawn("while :; do :; done");
    let pid = child.0.id();
    std::thread::sleep(Duration::from_millis(100));
    let start = DaemonSample::read(pid).expect("first reading");
    let ns_start = on_cpu_ns(pid);
    std::thread::sleep(Duration::from_secs(1));
    let end = DaemonSample::read(pid).expect("second reading");
    let ns_end = on_cpu_ns(pid);
    let cpu = measure(&start, &end).expect("measured");
    let secs = end.at.duration_since(start.at).as_secs_f64();
    let by_scheduler = (ns_end - ns_start) as f64 / 1e9 / secs * 100.0;
    assert!(
        (cpu.percent - by_scheduler).abs() <= 5.0 && cpu.percent > 0.0,
        "ticks say {} %, the scheduler {by_scheduler:.1} % ({:?} -> {:?})",
        cpu.percent,
        start.ticks,
        end.ticks
    );
    assert_eq!((cpu.threads, cpu.busy_threads), (1, 1), "{cpu:?}");
    assert!(
        cpu.limit_percent <= 100.0,
        "one thread gets one core at most: {cpu:?}"
    );
    assert!(clock_ticks().expect("CLK_TCK") > 0);
    // Another process at the end is not the same daemon.
    let other = spawn("sleep 5");
    let replaced = DaemonSample::read(other.0.id()).expect("reading");
    assert!(matches!(
        measure(&start, &replaced),
        Err(CpuError::Replaced(_))
    ));
    drop(child);
    std::thread::sleep(Duration::from_millis(100));
    assert!(matches!(
        DaemonSample::read(pid),
        Err(CpuError::Read { .. })
    ));
}

/// A thread that burns CPU and exits during the window: its time is in the process's
/// total (the kernel keeps it), not in any live thread's, and it is not a thread that ran.
#[test]
fn threads_that_exit_keep_their_time() {
    let pid = std::process::id();
    let start = DaemonSample::read(pid).expect("first reading");
    let worker = std::thread::spawn(|| {
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        let own = || stat(Path::new("/proc/thread-self/stat")).map_or(0, |s| s.ticks);
        let mut x = 0u64;
        while own() < 30 {
            for i in 0..100_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
        }
        (tid, own(), x)
    });
    let (tid, burnt, _) = worker.join().expect("worker");
    let end = DaemonSample::read(pid).expect("second reading");
    assert!(!end.tasks.contains_key(&tid), "the thread exited");
    let total = end.ticks - start.ticks;
    let live: u64 = end
        .tasks
        .iter()
        .map(|(t, ticks)| ticks - start.tasks.get(t).copied().unwrap_or(0).min(*ticks))
        .sum();
    assert!(
        total >= live + burnt - 2,
        "the process's total ({total} ticks) must keep the exited thread's {burnt}; its live \
         threads account for {live}"
    );
    let cpu = measure(&start, &end).expect("measured");
    assert!(cpu.busy_threads < end.tasks.len() as u64 + 1, "{cpu:?}");
}

/// CPUs in a `Cpus_allowed_list` ("0-3,6").
fn listed_cpus(list: &str) -> u32 {
    list.trim()
        .split(',')
        .filter(|r| !r.is_empty())
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<u32>().unwrap_or(0) - a.parse::<u32>().unwrap_or(0) + 1,
            None => 1,
        })
        .sum()
}

#[test]
fn affinity_and_online_cpus_are_the_kernels() {
    let child = spawn("sleep 30");
    let pid = child.0.id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(listed_cpus)
        .expect("Cpus_allowed_list");
    let sample = DaemonSample::read(pid).expect("reading");
    assert_eq!(sample.limit.affinity, Some(allowed), "{:?}", sample.limit);
    assert!(sample.limit.online >= allowed, "{:?}", sample.limit);
    let mut one = nix::sched::CpuSet::new();
    let first = (0..nix::sched::CpuSet::count())
        .find(|c| {
            nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
                .is_ok_and(|s| s.is_set(*c).unwrap_or(false))
        })
        .expect("a CPU this test may use");
    one.set(first).expect("cpu");
    let child_pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid"));
    nix::sched::sched_setaffinity(child_pid, &one).expect("pin the child");
    let pinned = DaemonSample::read(pid).expect("reading");
    assert_eq!(pinned.limit.affinity, Some(1));
    let limit = Limit {
        quota: None,
        ..pinned.limit.clone()
    };
    assert_eq!(limit.cores(4).0, 1.0);
    let by = if limit.online == 1 {
        LimitedBy::Cpus
    } else {
        LimitedBy::Affinity
    };
    assert_eq!(limit.cores(4), (1.0, by));
    assert_eq!(
        limit.cores(1),
        (1.0, LimitedBy::Threads),
        "a tie names threads"
    );
    assert_eq!(
        limit.cores(0),
        (1.0, LimitedBy::Threads),
        "no thread ran: one"
    );
}

#[test]
fn limits_are_the_smallest_and_ties_name_the_first() {
    let l = |online, affinity, quota| Limit {
        online,
        affinity,
        quota,
        unread: Vec::new(),
    };
    assert_eq!(l(8, Some(8), None).cores(1), (1.0, LimitedBy::Threads));
    assert_eq!(l(8, Some(8), None).cores(20), (8.0, LimitedBy::Cpus));
    assert_eq!(l(8, Some(2), None).cores(20), (2.0, LimitedBy::Affinity));
    assert_eq!(l(8, Some(2), Some(0.5)).cores(20), (0.5, LimitedBy::Quota));
    assert_eq!(l(8, None, Some(3.0)).cores(20), (3.0, LimitedBy::Quota));
    assert_eq!(l(2, Some(2), Some(2.0)).cores(2), (2.0, LimitedBy::Threads));
}

#[test]
fn cgroup_lines_and_mounts_are_read_as_the_kernel_writes_them() {
    let v1 = "12:pids:/\n4:cpu,cpuacct:/system.slice/fastd.service\n0::/system.slice\n";
    assert_eq!(
        cpu_cgroup(v1),
        Some((Hierarchy::V1, "/system.slice/fastd.service".to_owned()))
    );
    assert_eq!(
        cpu_cgroup("0::/user.slice/x\n"),
        Some((Hierarchy::V2, "/user.slice/x".to_owned()))
    );
    assert_eq!(cpu_cgroup("1:cpuacct:/\n"), None);
    let mounts = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                  32 31 0:29 / /sys/fs/cgroup/cpu\\040x rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
                  41 31 0:38 /ns /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
    assert_eq!(
        mount_of(mounts, &Hierarchy::V1),
        Some((PathBuf::from("/sys/fs/cgroup/cpu x"), "/".to_owned()))
    );
    let (point, root) = mount_of(mounts, &Hierarchy::V2).expect("v2 mount");
    assert_eq!(
        limit::cgroup_dirs(&point, &root, "/ns/a/b"),
        Some(vec![point.join("a/b"), point.join("a"), point.clone()])
    );
    assert_eq!(limit::cgroup_dirs(&point, &root, "/other/a"), None);
    assert_eq!(limit::cgroup_dirs(&point, &root, "/ns/../a"), None);
}

/// A cgroup of the CPU hierarchy made for the test, with a child; removed when dropped.
struct TestCgroup {
    hierarchy: Hierarchy,
    parent: PathBuf,
    child: PathBuf,
}

impl TestCgroup {
    fn new() -> TestCgroup {
        let own = std::fs::read_to_string("/proc/self/cgroup").expect("own cgroup");
        let (hierarchy, _) = cpu_cgroup(&own).expect("a cgroup hierarchy with the CPU");
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let (point, _) = mount_of(&mounts, &hierarchy).expect("its mount");
        if hierarchy == Hierarchy::V2 {
            std::fs::write(point.join("cgroup.subtree_control"), "+cpu").expect("+cpu at root");
        }
        let parent = point.join(format!("netdoctor-test-{}", std::process::id()));
        let child = parent.join("inner");
        std::fs::create_dir(&parent).expect("parent cgroup");
        if hierarchy == Hierarchy::V2 {
            std::fs::write(parent.join("cgroup.subtree_control"), "+cpu").expect("+cpu");
        }
        std::fs::create_dir(&child).expect("child cgroup");
        TestCgroup {
            hierarchy,
            parent,
            child,
        }
    }

    fn set_quota(&self, dir: &Path, micros: u32) {
        let (file, value) = match self.hierarchy {
            Hierarchy::V2 => ("cpu.max", format!("{micros} 100000")),
            Hierarchy::V1 => ("cpu.cfs_quota_us", micros.to_string()),
        };
        std::fs::write(dir.join(file), value).expect("quota");
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.child);
        let _ = std::fs::remove_dir(&self.parent);
    }
}

/// A busy child in a cgroup whose parent allows half a core, then itself a fifth: the
/// limit is the smallest, and what it used stays within it.
#[test]
fn a_cgroup_quota_and_its_ancestors_limit_the_daemon() {
    if !crate::testing::root_or_skip("to make cgroups") {
        return;
    }
    let cgroup = TestCgroup::new();
    let child = spawn("while :; do :; done");
    let pid = child.0.id();
    std::fs::write(cgroup.child.join("cgroup.procs"), pid.to_string()).expect("move child");
    assert_eq!(cgroup_quota(pid), Ok(None), "no quota yet");
    cgroup.set_quota(&cgroup.parent, 50_000);
    assert_eq!(cgroup_quota(pid), Ok(Some(0.5)), "the parent's");
    cgroup.set_quota(&cgroup.child, 20_000);
    assert_eq!(cgroup_quota(pid), Ok(Some(0.2)), "the smallest");
    std::thread::sleep(Duration::from_millis(300));
    let start = DaemonSample::read(pid).expect("reading");
    std::thread::sleep(Duration::from_secs(1));
    let end = DaemonSample::read(pid).expect("reading");
    let cpu = measure(&start, &end).expect("measured");
    assert_eq!(
        (cpu.limit_percent, cpu.limited_by),
        (20.0, LimitedBy::Quota),
        "{cpu:?}"
    );
    assert!(
        cpu.percent <= 20.0 + 3.0,
        "a throttled process stays within its quota: {cpu:?}"
    );
    drop(child);
}
