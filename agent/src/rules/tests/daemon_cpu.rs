//! `tunnel.daemon_cpu_bound`: a userspace tunnel daemon at the CPU it can get while its
//! tunnel carries traffic, with the remedy that fits the daemon; quiet below the limit,
//! without traffic, and where the CPU was not measured.

use super::healthy;
use crate::config::cpu::{DaemonCpu, LimitedBy};
use crate::facts::Facts;
use crate::rules::{evaluate, finding::Finding, RuleSet};

const ID: &str = "tunnel.daemon_cpu_bound";

/// `daemon` (pid 4242) used `percent` of one core against a limit of `limit` set by
/// `by`, while the interface carried 300 Mbit/s.
fn daemon(f: &mut Facts, daemon: &str, percent: f64, limit: f64, by: LimitedBy) {
    f.iface.kind = "tun".into();
    f.tunnel.daemon = daemon.into();
    f.tunnel.load.daemon_pid = 4242;
    f.tunnel.load.daemon_uid = 0;
    f.tunnel.load.set_cpu(&DaemonCpu {
        percent,
        limit_percent: limit,
        limited_by: by,
        threads: 1,
        busy_threads: 1,
    });
    f.tunnel.load.throughput_mbps = 300.0;
    f.tunnel.load.packets_per_s = 26_000.0;
    f.host.cpus_online = 4;
    f.host.cpu_busy_percent = 30.0;
}

fn found(f: &Facts) -> Option<Finding> {
    let rules = RuleSet::builtin().expect("built-in rules");
    evaluate(&rules, &f.to_json())
        .into_iter()
        .find(|x| x.id == ID)
}

fn finding(change: impl FnOnce(&mut Facts)) -> Finding {
    let mut f = healthy();
    change(&mut f);
    found(&f).unwrap_or_else(|| panic!("{ID} should fire on {:?}", f.tunnel.load))
}

#[test]
fn a_daemon_at_its_limit_is_named_with_the_remedy_for_it() {
    let wg = finding(|f| daemon(f, "wireguard-go", 197.0, 200.0, LimitedBy::Cpus));
    assert!(
        wg.summary
            .contains("wireguard-go (pid 4242) serving wg0 used 197.0 % of one core")
            && wg
                .summary
                .contains("98.5 % of the 200.0 % it can get (every online CPU")
            && wg.summary.contains("300 Mbit/s"),
        "{}",
        wg.summary
    );
    assert!(
        wg.fix
            .starts_with("Use kernel WireGuard instead of wireguard-go")
            && wg.fix.contains("ip link add wg0 type wireguard"),
        "{}",
        wg.fix
    );
    assert_eq!(wg.evidence.get("pid"), Some(&serde_json::json!(4242)));
    assert_eq!(
        wg.evidence.get("throughput_mbps"),
        Some(&serde_json::json!(300.0))
    );

    let fastd = finding(|f| daemon(f, "fastd", 97.0, 100.0, LimitedBy::Threads));
    assert!(
        fastd
            .summary
            .contains("one thread ran: it is single-threaded"),
        "{}",
        fastd.summary
    );
    assert!(
        fastd.fix.contains("method \"salsa2012+umac\";"),
        "{}",
        fastd.fix
    );
    let faster = |methods: &[&str]| {
        finding(|f| {
            daemon(f, "fastd", 97.0, 100.0, LimitedBy::Threads);
            f.tunnel.methods = methods.iter().map(|m| (*m).to_owned()).collect();
        })
        .fix
    };
    let fix = faster(&["salsa2012+umac", "null"]);
    assert!(
        fix.contains("already prefers salsa2012+umac") && fix.contains("several fastd instances"),
        "the method in use is not the remedy: {fix}"
    );
    let fix = faster(&["null"]);
    assert!(
        fix.contains("null method encrypts nothing") && fix.contains("offload l2tp yes;"),
        "{fix}"
    );
    let fix = faster(&["aes128-gcm", "salsa2012+umac"]);
    assert!(fix.contains("offer a cheaper method first"), "{fix}");
    let tinc = finding(|f| daemon(f, "tincd", 99.0, 100.0, LimitedBy::Threads));
    assert!(
        tinc.fix.contains("SPTPS") && tinc.fix.contains("fastd") && tinc.fix.contains("VpnCloud"),
        "{}",
        tinc.fix
    );
    let ts = finding(|f| {
        daemon(f, "tailscaled", 390.0, 400.0, LimitedBy::Cpus);
        f.tunnel.underlay_iface = "eth0".into();
    });
    assert!(
        ts.fix.contains("Linux 6.2")
            && ts
                .fix
                .contains("ethtool -K eth0 rx-udp-gro-forwarding on rx-gro-list off"),
        "{}",
        ts.fix
    );
    let other = finding(|f| daemon(f, "vpncloud", 95.0, 100.0, LimitedBy::Threads));
    assert!(other.fix.starts_with("Give the daemon"), "{}", other.fix);
}

#[test]
fn a_limit_set_from_outside_is_named_first() {
    let quota = finding(|f| {
        daemon(f, "wireguard-go", 19.6, 20.0, LimitedBy::Quota);
        f.tunnel.load.daemon_uid = 65534;
    });
    assert!(
        quota.summary.contains("(pid 4242, uid 65534)")
            && quota.summary.contains("its cgroup's CPU quota"),
        "{}",
        quota.summary
    );
    assert!(
        quota.fix.starts_with("First lift its cgroup's CPU quota")
            && quota
                .fix
                .contains("to 20.0 % of one core. Use kernel WireGuard"),
        "{}",
        quota.fix
    );
    let pinned = finding(|f| daemon(f, "wireguard-go", 99.0, 100.0, LimitedBy::Affinity));
    assert!(
        pinned.fix.contains("taskset -a -p -c 0-3 4242"),
        "{}",
        pinned.fix
    );
}

#[test]
fn below_its_limit_idle_or_unmeasured_the_daemon_is_not_blamed() {
    let quiet = |what: &str, change: &dyn Fn(&mut Facts)| {
        let mut f = healthy();
        change(&mut f);
        assert!(found(&f).is_none(), "{what}: {:?}", f.tunnel.load);
    };
    quiet("85 % of its limit: headroom left", &|f| {
        daemon(f, "fastd", 85.0, 100.0, LimitedBy::Threads)
    });
    quiet("a fixed small rate", &|f| {
        daemon(f, "wireguard-go", 4.0, 20.0, LimitedBy::Quota)
    });
    quiet("busy, but the tunnel carried nothing", &|f| {
        daemon(f, "tincd", 99.0, 100.0, LimitedBy::Threads);
        f.tunnel.load.throughput_mbps = 0.2;
        f.tunnel.load.packets_per_s = 40.0;
    });
    quiet("not measured", &|f| {
        daemon(f, "fastd", 99.0, 100.0, LimitedBy::Threads);
        f.tunnel.load.daemon_cpu_percent = -1.0;
        f.tunnel.load.daemon_cpu_limit_percent = -1.0;
        f.tunnel.load.daemon_cpu_of_limit_percent = -1.0;
    });
    quiet("no daemon (kernel WireGuard)", &|f| {
        f.tunnel.load = crate::config::cpu::TunnelLoad {
            throughput_mbps: 900.0,
            ..Default::default()
        }
    });
    // Small packets: few Mbit/s, many packets, still traffic.
    let mut f = healthy();
    daemon(&mut f, "fastd", 98.0, 100.0, LimitedBy::Threads);
    f.tunnel.load.throughput_mbps = 0.9;
    f.tunnel.load.packets_per_s = 1500.0;
    assert!(found(&f).is_some(), "{:?}", f.tunnel.load);
}
