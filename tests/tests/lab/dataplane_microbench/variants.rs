//! Compiled variants of `ebpf/packet.bpf.c` side by side (`ND_OBJS=a.o,b.o`): each loaded
//! the way the agent loads the real one, measured in the warm `BPF_PROG_TEST_RUN` loop
//! (`objects_ns_per_run`) and on one veth under the same iperf3 runs (`objects_under_iperf3`).

use super::*;

/// The empty tc programs' descriptors: [ingress, egress].
fn floor_fds(fl: &floor::FloorSkel<'_>) -> [i32; 2] {
    [
        fl.progs.floor_tc_in.as_fd().as_raw_fd(),
        fl.progs.floor_tc_out.as_fd().as_raw_fd(),
    ]
}

/// A compiled variant of packet.bpf.c, loaded the way the agent loads the real one (map
/// sizes per CPU, size bounds), with interface `ifindex` watched in its preferred slot
/// (ifindex % 256) on every CPU, both directions, MTU 1500, Ethernet, with the local path
/// on (as with socket telemetry loaded) for TCP to one local address.
struct Variant {
    path: String,
    obj: libbpf_rs::Object,
}

impl Variant {
    fn load(path: &str, ifindex: u32, local: Ipv4Addr) -> Result<Variant> {
        use libbpf_rs::{MapCore, MapFlags, ObjectBuilder};
        let ncpu = u32::try_from(libbpf_rs::num_possible_cpus()?)?;
        let mut open = ObjectBuilder::default().open_file(path)?;
        for mut m in open.maps_mut() {
            // wg_cache: the session cache of variants that have one.
            if ["flow_cache", "iface_stats", "wg_cache"].contains(&m.name().to_str().unwrap_or(""))
            {
                m.set_max_entries(m.max_entries() * ncpu)?;
            }
            // size_bounds, the first variable of .rodata.
            if m.name().to_string_lossy().ends_with(".rodata") {
                if let Some(v) = m.initial_value_mut() {
                    let bounds = netdoctor::kernel::packet::counters::SIZE_BUCKET_BOUNDS;
                    for (i, b) in bounds.iter().enumerate() {
                        v[i * 4..i * 4 + 4].copy_from_slice(&b.to_ne_bytes());
                    }
                }
            }
        }
        let obj = open.load().with_context(|| format!("loading {path}"))?;
        // struct nd_iface_dir: owner, MTU, link (Ethernet: 0), the local path on, at the offsets
        // and sizes the object's BTF gives, so that variants whose header differs compare.
        if let Some(stats) = obj.maps().find(|m| m.name() == "iface_stats") {
            let mut v = vec![0u8; stats.value_size() as usize];
            let header = iface_header(&obj)?;
            let put = |v: &mut [u8], field: &str, bytes: &[u8]| -> Result<()> {
                let (off, size) = *header
                    .get(field)
                    .with_context(|| format!("{path}: nd_iface_dir has no {field}"))?;
                let value = bytes
                    .get(..size)
                    .with_context(|| format!("{path}: {field} is wider than its value"))?;
                v[off..off + size].copy_from_slice(value);
                Ok(())
            };
            put(&mut v, "ifindex", &ifindex.to_ne_bytes())?;
            put(&mut v, "mtu", &1500u32.to_ne_bytes())?;
            // ND_LOCAL_TCP=0: the local path off, so local TCP takes the flow record as a
            // forwarded packet would. `path` (enum nd_path's bits: 1 the local path, 8 and
            // 16 received IPv4 and IPv6 may be local) was a flag named `local_tcp` before.
            let local = env_or("ND_LOCAL_TCP", 1) != 0;
            if header.contains_key("path") {
                put(&mut v, "path", &[if local { 1 | 8 | 16 } else { 0 }])?;
            } else {
                put(&mut v, "local_tcp", &[u8::from(local)])?;
            }
            for cpu in 0..ncpu {
                for dir in 0..2 {
                    let key = (cpu * 256 + ifindex % 256) * 2 + dir;
                    stats.update(&key.to_ne_bytes(), &v, MapFlags::ANY)?;
                }
            }
        }
        // struct nd_local_addrs: v4_ok, v6_ok, then the IPv4 addresses: `local` only
        // (variants older than the local path have no such map).
        if let Some(addrs) = obj.maps().find(|m| m.name() == "local_addrs") {
            let mut v = vec![0u8; addrs.value_size() as usize];
            v[0..4].copy_from_slice(&1u32.to_ne_bytes());
            v[8..12].copy_from_slice(&local.octets());
            addrs.update(&0u32.to_ne_bytes(), &v, MapFlags::ANY)?;
        }
        Ok(Variant {
            path: path.to_string(),
            obj,
        })
    }

    fn prog(&self, name: &str) -> Result<i32> {
        self.obj
            .progs()
            .find(|p| p.name() == name)
            .map(|p| p.as_fd().as_raw_fd())
            .with_context(|| format!("{}: no program {name}", self.path))
    }
}

/// Offset and size of each field of `struct nd_iface_dir`'s header (up to its counters),
/// from the object's BTF: the layout differs between variants. A field's size is the
/// distance to the next (the header has no implicit padding, packet.h).
fn iface_header(
    obj: &libbpf_rs::Object,
) -> Result<std::collections::HashMap<String, (usize, usize)>> {
    use libbpf_rs::btf::types::{MemberAttr, Struct};
    let btf = obj.btf()?.context("the object has no BTF")?;
    let dir: Struct<'_> = btf
        .type_by_name("nd_iface_dir")
        .context("no struct nd_iface_dir in the object's BTF")?;
    let mut fields: Vec<(String, usize)> = dir
        .iter()
        .filter_map(|m| match (m.name, m.attr) {
            (Some(name), MemberAttr::Normal { offset }) => {
                Some((name.to_string_lossy().into_owned(), offset as usize / 8))
            }
            _ => None,
        })
        .collect();
    fields.sort_by_key(|f| f.1);
    Ok(fields
        .windows(2)
        .map(|w| (w[0].0.clone(), (w[0].1, w[1].1 - w[0].1)))
        .collect())
}

/// The variants' paths from `ND_OBJS`; `None` (after saying so) when it is not set.
fn variant_paths() -> Option<Vec<String>> {
    let Ok(paths) = std::env::var("ND_OBJS") else {
        println!("SKIP: set ND_OBJS=a.o,b.o (compiled variants of packet.bpf.c)");
        return None;
    };
    Some(paths.split(',').map(str::to_owned).collect())
}

/// The variants, watching `ifindex` with the local path on for TCP to `local`.
fn load_variants(paths: &[String], ifindex: u32, local: Ipv4Addr) -> Result<Vec<Variant>> {
    paths
        .iter()
        .map(|p| Variant::load(p, ifindex, local))
        .collect()
}

/// The warm loop of `hot_path_ns_per_run` for compiled variants (`ND_OBJS`), interleaved
/// with each other and the empty program so the host's drift hits them alike: instruction
/// cost, not cache misses. Also the verifier's work and the JIT size, and the flow cache's
/// worst case (every packet a new flow: each takes a slot and retires another flow).
#[test]
#[ignore = "a measurement for experiments: ND_OBJS=a.o,b.o"]
fn objects_ns_per_run() -> Result<()> {
    lab_guard!();
    let Some(paths) = variant_paths() else {
        return Ok(());
    };
    // 10.0.0.2: the frames' destination.
    let vars = load_variants(&paths, LO, Ipv4Addr::new(10, 0, 0, 2))?;
    let mut storage = MaybeUninit::uninit();
    let fl = load_floor(&mut storage)?;
    let floors = floor_fds(&fl);
    let cases = [
        (
            "tcp data in",
            "nd_tc_ingress",
            0,
            frame_tcp(40000, 1000, 1448),
        ),
        // The same segment again and again: the local path's check against the connection's
        // entry (data seen before), not the per-CPU hint's shortcut for new data.
        (
            "local data in",
            "nd_tc_ingress",
            0,
            local(frame_tcp(40003, 1000, 1448)),
        ),
        ("ack out", "nd_tc_egress", 1, frame_tcp(40002, 1000, 0)),
        // BPF_PROG_TEST_RUN's skb has a socket of its own, whose local port is 0.
        ("local ack out", "nd_tc_egress", 1, frame_tcp(0, 1000, 0)),
        ("udp in", "nd_tc_ingress", 0, frame_udp(40001, 1200)),
    ];
    let (repeat, rounds) = (env_or("ND_REPEAT", 2000), env_or("ND_ROUNDS", 300));
    // [variant][case] per-round ns, [hook] the floor's.
    let mut ns = vec![vec![Vec::new(); cases.len()]; vars.len()];
    let mut floor_ns = vec![Vec::new(); 2];
    for _ in 0..rounds {
        for (v, var) in vars.iter().enumerate() {
            for (c, (_, prog, _, data)) in cases.iter().enumerate() {
                ns[v][c].push(test_run::ns_per_run(var.prog(prog)?, data, repeat)?);
            }
        }
        for (hook, fd) in floors.iter().enumerate() {
            // The first frame of the hook's cases.
            let frame = cases.iter().find(|c| c.2 == hook).map_or(&[][..], |c| &c.3);
            floor_ns[hook].push(test_run::ns_per_run(*fd, frame, repeat)?);
        }
    }
    let floor: Vec<f64> = floor_ns.into_iter().map(median).collect();
    println!(
        "floor (empty program): tc in {:.1} ns, tc out {:.1} ns",
        floor[0], floor[1]
    );
    for (v, var) in vars.iter().enumerate() {
        let deltas: Vec<String> = cases
            .iter()
            .enumerate()
            .map(|(c, (name, _, hook, _))| {
                format!("{name} Δ {:5.1}", median(ns[v][c].clone()) - floor[*hook])
            })
            .collect();
        let info = prog_info(var.prog("nd_tc_ingress")?, &mut [])?;
        // The worst case: 8,192 one-packet flows.
        let eg = var.prog("nd_tc_egress")?;
        let mut new_flows = 0.0;
        for i in 0..8192u16 {
            new_flows += test_run::ns_per_run(eg, &frame_udp(1 + i, 64), 1)?;
        }
        println!(
            "{}  new flow {:.0} ns  ({}: {} verified insns, jited {} B)",
            deltas.join("  "),
            new_flows / 8192.0,
            var.path,
            info.verified_insns,
            info.jited_prog_len
        );
    }
    Ok(())
}

/// A/B of compiled variants (`ND_OBJS`) under real traffic. Every variant's tc programs are
/// attached to the same veth (the iperf3 receiver's) in the same runs, beside the empty
/// floor programs, in an order rotated every round, so each sees the same packets at the
/// same time and the host's drift hits them alike. Prints each variant's ns per run above
/// the floor, the median over `ND_ROUNDS` (default 10) runs of `ND_SECS` (default 3) s.
/// Programs in one chain evict each other's cache lines, so the figures are higher than
/// one build's alone (`.ci/bench`); their differences are what this measures.
///
/// `ND_LOCAL_TCP=0` turns the local path off, so every TCP segment takes the flow record, as
/// a forwarded one does. `ND_PATH=wg`: the iperf3 traffic goes through a wireguard-go tunnel over the pair, so the
/// programs on b's veth see a WireGuard underlay (transport data in, the ACKs' messages
/// out) instead of local TCP.
#[test]
#[ignore = "a measurement for experiments: ND_OBJS=a.o,b.o"]
fn objects_under_iperf3() -> Result<()> {
    use netdoctor_lab::bpf::{link_create, StatsGuard};
    use netdoctor_lab::traffic::iperf3_client;
    use netdoctor_lab::{Iperf3Opts, Iperf3Server, PairTopology};
    lab_guard!();
    let Some(paths) = variant_paths() else {
        return Ok(());
    };
    let (rounds, secs) = (env_or("ND_ROUNDS", 10), env_or("ND_SECS", 3));
    let lab = PairTopology::new(1500)?;
    let wg = match std::env::var("ND_PATH").as_deref() {
        Ok("wg") => Some(netdoctor_lab::WgTunnel::new(
            &lab.a,
            PairTopology::A_IP,
            &lab.b,
            PairTopology::B_IP,
            &netdoctor_lab::WgConfig::default(),
        )?),
        Ok("local") | Err(_) => None,
        Ok(other) => anyhow::bail!("ND_PATH={other}: expected local or wg"),
    };
    let server_ip = wg
        .as_ref()
        .map_or(PairTopology::B_IP, |w| w.b.ip())
        .to_owned();
    println!(
        "path: {}",
        if wg.is_some() {
            "wireguard underlay"
        } else {
            "local"
        }
    );
    let _server = Iperf3Server::start(&lab.b, 5201)?;
    // This thread joins b's namespace: interface indexes and tcx links resolve there.
    let ns = std::fs::File::open(lab.b.path())?;
    nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)?;
    let ifindex = nix::net::if_::if_nametoindex(PairTopology::IFNAME)?;
    let _stats = StatsGuard::enable()?;
    let vars = load_variants(&paths, ifindex, PairTopology::B_IP.parse()?)?;
    let mut storage = MaybeUninit::uninit();
    let fl = load_floor(&mut storage)?;
    // (label, [tc ingress, tc egress] program fds) per variant, the floor last.
    let mut progs: Vec<(String, [i32; 2])> = vars
        .iter()
        .map(|v| {
            Ok((
                v.path.clone(),
                [v.prog("nd_tc_ingress")?, v.prog("nd_tc_egress")?],
            ))
        })
        .collect::<Result<_>>()?;
    progs.push(("floor".into(), floor_fds(&fl)));
    let attach = |fd: i32, hook: usize| {
        let ty = [libbpf_sys::BPF_TCX_INGRESS, libbpf_sys::BPF_TCX_EGRESS][hook];
        link_create(fd, ifindex, ty, 0).context("tcx link")
    };
    let run_stats = |fd: i32| {
        prog_info(fd, &mut [])
            .map(|i| (i.run_time_ns, i.run_cnt))
            .context("bpf_prog_info")
    };
    let n = progs.len();
    // [program][hook] ns per run, one per round.
    let mut per_run = vec![vec![Vec::new(); 2]; n];
    for round in 0..rounds as usize {
        let mut links = Vec::new();
        for k in 0..n {
            for hook in 0..2 {
                links.push(attach(progs[(k + round) % n].1[hook], hook)?);
            }
        }
        let before: Vec<Vec<(u64, u64)>> = progs
            .iter()
            .map(|(_, fds)| fds.iter().map(|fd| run_stats(*fd)).collect())
            .collect::<Result<_>>()?;
        let mut opts = Iperf3Opts::new(&server_ip);
        opts.duration_secs = secs;
        let report = iperf3_client(&lab.a, &opts)?;
        for (p, (_, fds)) in progs.iter().enumerate() {
            for hook in 0..2 {
                let (t, c) = run_stats(fds[hook])?;
                let (t0, c0) = before[p][hook];
                per_run[p][hook].push((t - t0) as f64 / (c - c0).max(1) as f64);
            }
        }
        drop(links);
        println!(
            "round {round}: {:.1} Gbit/s, first in the chain: {}",
            report.received_bytes as f64 * 8.0 / f64::from(secs) / 1e9,
            progs[round % n].0
        );
    }
    let floor = &per_run[n - 1];
    println!(
        "machine: kernel {} | CPU {} | {} cores",
        netdoctor_lab::stats::kernel_release(),
        netdoctor_lab::stats::cpu_model(),
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    println!(
        "floor: tc in {:.1} ns/run, tc out {:.1} ns/run",
        median(floor[0].clone()),
        median(floor[1].clone())
    );
    for (p, (label, _)) in progs.iter().enumerate().take(n - 1) {
        // Δ per round (the floor moves with the round): median [range].
        let delta = |hook: usize| {
            let d: Vec<f64> = per_run[p][hook]
                .iter()
                .zip(&floor[hook])
                .map(|(a, f)| a - f)
                .collect();
            let (lo, hi) = d
                .iter()
                .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
            format!("{:5.1} [{lo:.0}..{hi:.0}]", median(d))
        };
        println!("Δ tc-in {}  tc-out {}   {label}", delta(0), delta(1));
    }
    Ok(())
}
