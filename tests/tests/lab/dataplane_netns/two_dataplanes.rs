//! Two data planes attached by netlink to one veth in one process, as the agent's monitor
//! and a diagnosis started through its API are: each cls_bpf filter has a handle of its
//! own at netdoctor's priority, both count every packet, and each data plane removes only
//! its own filter, the last one the clsact qdisc too. Generic XDP is one program per
//! interface: the second data plane leaves the first one's in place and counts received
//! packets with tc, in a note.

use std::mem::MaybeUninit;
use std::net::IpAddr;

use anyhow::{anyhow, ensure, Context, Result};
use netdoctor::kernel::packet::{Dataplane, IngressHook, LinkType, Options, Target};
use netdoctor::kernel::views::Direction;
use netdoctor::kernel::{AttachMethod, XdpMode};
use netdoctor_lab::attached::{attached, ifindex};
use netdoctor_lab::{lab_guard, traffic, Netns, PairTopology, PingOpts};

use crate::dataplane_netns::helpers::{has_clsact, ip, our_filters, IF};

/// Runs `f` on a thread inside `ns` (ifindexes and netlink sockets are per namespace), with
/// `ns` still at hand for commands.
fn in_namespace<R: Send>(ns: &Netns, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
    let file = std::fs::File::open(ns.path()).context("opening the namespace")?;
    std::thread::scope(|s| {
        s.spawn(move || {
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .context("setns(CLONE_NEWNET)")?;
            f()
        })
        .join()
        .map_err(|_| anyhow!("the namespace's thread panicked"))?
    })
}

fn netlink(ingress: IngressHook) -> Options {
    Options {
        ingress,
        xdp_mode: XdpMode::Generic,
        method: AttachMethod::Netlink,
        ..Options::default()
    }
}

/// Echo requests (egress) and replies (ingress) `dp` counted between the two ends.
fn echoes(dp: &Dataplane<'_>) -> Result<(u64, u64)> {
    let (a, b): (IpAddr, IpAddr) = (ip(PairTopology::A_IP)?, ip(PairTopology::B_IP)?);
    let mut out = (0, 0);
    for f in dp.flows()?.iter().filter(|f| f.protocol == 1) {
        match f.direction {
            Direction::Egress if f.src == a && f.dst == b => out.0 += f.packets,
            Direction::Ingress if f.src == b && f.dst == a => out.1 += f.packets,
            _ => {}
        }
    }
    Ok(out)
}

/// Five pings from a to b, all answered: (requests, replies).
fn ping5(ns: &Netns) -> Result<(u64, u64)> {
    let r = traffic::ping(
        ns,
        PairTopology::B_IP,
        &PingOpts {
            count: 5,
            interval_secs: 0.02,
            ..PingOpts::default()
        },
    )?;
    ensure!(r.all_received(), "ping lost packets: {r:?}");
    Ok((u64::from(r.transmitted), u64::from(r.received)))
}

fn target(ns: &Netns) -> Result<Target> {
    Ok(Target {
        index: ifindex(ns, IF)?,
        name: IF.into(),
        mtu: 1500,
        link: LinkType::Ether,
    })
}

#[test]
fn two_netlink_dataplanes_on_one_veth_keep_their_own_filters() -> Result<()> {
    lab_guard!("tc", "ping");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let iface = target(ns)?;
    in_namespace(ns, || {
        let (mut s1, mut s2) = (MaybeUninit::uninit(), MaybeUninit::uninit());
        let mut first = Dataplane::load(&mut s1, netlink(IngressHook::Tc))?;
        let mut second = Dataplane::load(&mut s2, netlink(IngressHook::Tc))?;
        for dp in [&mut first, &mut second] {
            let hooks = dp.attach(&iface)?;
            ensure!(hooks.method == AttachMethod::Netlink, "{hooks:?}");
        }
        for (dir, name) in [("ingress", "nd_tc_ingress"), ("egress", "nd_tc_egress")] {
            let handles = our_filters(ns, dir, name)?;
            ensure!(
                handles.len() == 2 && handles[0] != handles[1],
                "{dir}: two filters of ours at two handles expected, got {handles:?}"
            );
        }
        let sent = ping5(ns)?;
        ensure!(
            echoes(&first)? == sent && echoes(&second)? == sent,
            "both count what crosses: sent {sent:?}, first {:?}, second {:?}",
            echoes(&first)?,
            echoes(&second)?
        );

        // The second goes: the first keeps its filters and goes on counting.
        drop(second);
        for (dir, name) in [("ingress", "nd_tc_ingress"), ("egress", "nd_tc_egress")] {
            let left = our_filters(ns, dir, name)?;
            ensure!(left.len() == 1, "{dir} after the second went: {left:?}");
        }
        ensure!(has_clsact(ns)?, "the clsact went while the first uses it");
        let more = ping5(ns)?;
        let counted = echoes(&first)?;
        ensure!(
            counted == (sent.0 + more.0, sent.1 + more.1),
            "the first stopped counting when the second went: {counted:?}, sent {sent:?} + {more:?}"
        );

        // The first goes: nothing is left, the clsact it created neither.
        drop(first);
        let end = attached(ns, IF)?;
        ensure!(end.nothing() && !has_clsact(ns)?, "after both: {end:#?}");
        Ok(())
    })
}

#[test]
fn a_second_dataplane_counts_with_tc_where_the_first_has_xdp() -> Result<()> {
    lab_guard!("tc", "ping");
    let pair = PairTopology::new(1500)?;
    let ns = &pair.a;
    let iface = target(ns)?;
    let xdp_id = || -> Result<Option<u64>> {
        let link: serde_json::Value =
            serde_json::from_str(&ns.ip(&["-j", "-d", "link", "show", "dev", IF])?)?;
        Ok(link.pointer("/0/xdp/prog/id").and_then(|v| v.as_u64()))
    };
    in_namespace(ns, || {
        let (mut s1, mut s2) = (MaybeUninit::uninit(), MaybeUninit::uninit());
        let mut first = Dataplane::load(&mut s1, netlink(IngressHook::Xdp))?;
        let mut second = Dataplane::load(&mut s2, netlink(IngressHook::Xdp))?;
        let hooks = first.attach(&iface)?;
        ensure!(
            hooks.ingress == "xdp-generic" && hooks.note.is_none(),
            "{hooks:?}"
        );
        let theirs = xdp_id()?.context("no XDP after the first attached")?;
        let hooks = second.attach(&iface)?;
        let note = hooks.note.clone().unwrap_or_default();
        ensure!(
            hooks.ingress == "tc"
                && note.contains(&format!("{IF}: XDP is taken by nd_xdp_ingress"))
                && note.contains("counted with tc instead"),
            "the second data plane: {hooks:?}"
        );
        ensure!(
            xdp_id()? == Some(theirs),
            "the first one's XDP program was replaced"
        );
        // The second counts requests with its tc egress filter and replies with its tc
        // ingress filter. What that filter sees behind generic XDP depends on the kernel:
        // 6.18 hands it veth frames without their Ethernet header (the skb generic XDP
        // copied has no mac_len), which it counts as non-IP; so here its ingress packets
        // are counted, not their flows.
        let sent = ping5(ns)?;
        let ingress = second
            .counters(iface.index)?
            .map_or(0, |c| c.ingress.packets);
        ensure!(
            echoes(&first)? == sent && echoes(&second)?.0 == sent.0 && ingress >= sent.1,
            "both count what crosses: sent {sent:?}, first {:?}, second {:?} and {ingress} \
             packets received",
            echoes(&first)?,
            echoes(&second)?
        );
        drop(second);
        ensure!(
            xdp_id()? == Some(theirs),
            "the first one's XDP went with the second"
        );
        let more = ping5(ns)?;
        ensure!(
            echoes(&first)? == (sent.0 + more.0, sent.1 + more.1),
            "the first stopped counting when the second went"
        );
        drop(first);
        let end = attached(ns, IF)?;
        ensure!(end.nothing() && !has_clsact(ns)?, "after both: {end:#?}");
        Ok(())
    })
}
