//! Random packet loss with nftables (this kernel has no `tc netem`).
//!
//! Uses a `netdev` table `ndloss` in the namespace with one base chain per
//! interface and direction, hooked at the device's `ingress` or `egress`,
//! with the rule `numgen random mod 100 < N counter drop`. Device hooks act
//! like loss on the wire for traffic *passing through* (a router) or
//! *arriving* (ingress). Egress drops on the sending host itself are seen by
//! its own stack (TCP treats them as local congestion, not as lost
//! segments): to make a sender retransmit, drop at the receiver's ingress or
//! anywhere on a router.

use anyhow::{bail, Context, Result};

use crate::cmd;
use crate::netns::Netns;

/// nft table holding the loss chains (family `netdev`).
pub const TABLE: &str = "ndloss";

/// Which way packets are dropped on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Packets received by the interface (netdev `ingress` hook).
    Ingress,
    /// Packets transmitted by the interface (netdev `egress` hook).
    Egress,
}

impl Direction {
    fn hook(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }
}

/// Active loss on one interface/direction; removed on `Drop` (or with the
/// namespace).
#[derive(Debug)]
pub struct PacketLoss {
    netns_path: std::path::PathBuf,
    netns: String,
    chain: String,
    percent: u8,
}

impl PacketLoss {
    /// Drops `percent` % (0-100) of the packets of `ifname` in `direction`,
    /// chosen at random, inside `ns`. One instance per interface and
    /// direction.
    pub fn add(ns: &Netns, ifname: &str, direction: Direction, percent: u8) -> Result<PacketLoss> {
        Self::add_matching(ns, ifname, direction, percent, &[])
    }

    /// [`PacketLoss::add`] for the packets `matches` selects only (nft expressions such as
    /// `["udp", "sport", "51820"]`): the rest, ARP included, passes.
    pub fn add_matching(
        ns: &Netns,
        ifname: &str,
        direction: Direction,
        percent: u8,
        matches: &[&str],
    ) -> Result<PacketLoss> {
        if percent > 100 {
            bail!("loss percent {percent} > 100");
        }
        let chain = format!(
            "{}_{}",
            direction.hook(),
            ifname
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect::<String>()
        );
        ns.run(&["nft", "add", "table", "netdev", TABLE])
            .context("creating nft loss table")?;
        let spec = format!(
            "{{ type filter hook {} device \"{ifname}\" priority 0; policy accept; }}",
            direction.hook()
        );
        ns.run(&["nft", "add", "chain", "netdev", TABLE, &chain, &spec])
            .with_context(|| format!("creating loss chain {chain}"))?;
        let loss = PacketLoss {
            netns_path: ns.path(),
            netns: ns.name().to_owned(),
            chain,
            percent,
        };
        let percent = percent.to_string();
        let mut rule = vec!["nft", "add", "rule", "netdev", TABLE, &loss.chain];
        rule.extend(matches);
        // nft's `mod 100` yields 0-99, and refuses `< 100`: all of them is a plain drop.
        if loss.percent < 100 {
            rule.extend(["numgen", "random", "mod", "100", "<", &percent]);
        }
        rule.extend(["counter", "drop"]);
        ns.run(&rule)
            .with_context(|| format!("adding loss rule to {}", loss.chain))?;
        Ok(loss)
    }

    /// Configured loss percentage.
    pub fn percent(&self) -> u8 {
        self.percent
    }

    /// Packets dropped so far (the rule's counter).
    pub fn dropped_packets(&self) -> Result<u64> {
        let out = self.nft(&["-j", "list", "chain", "netdev", TABLE, &self.chain])?;
        let v: serde_json::Value =
            serde_json::from_str(&out).context("parsing `nft -j list chain`")?;
        let counters = v
            .get("nftables")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
            .filter_map(|o| o.get("rule")?.get("expr")?.as_array())
            .flatten()
            .filter_map(|e| e.get("counter")?.get("packets")?.as_u64());
        Ok(counters.sum())
    }

    fn nft(&self, args: &[&str]) -> Result<String> {
        let mut net = std::ffi::OsString::from("--net=");
        net.push(&self.netns_path);
        let mut command = std::process::Command::new("nsenter");
        command.arg(net).arg("--").arg("nft").args(args);
        cmd::run_checked(&mut command, cmd::DEFAULT_TIMEOUT)
            .with_context(|| format!("in namespace {}", self.netns))
    }
}

impl Drop for PacketLoss {
    fn drop(&mut self) {
        if !self.netns_path.exists() {
            return; // namespace already gone, and the table with it
        }
        let chain = self.chain.clone();
        let result = self
            .nft(&["flush", "chain", "netdev", TABLE, &chain])
            .and_then(|_| self.nft(&["delete", "chain", "netdev", TABLE, &chain]));
        if let Err(e) = result {
            eprintln!("netdoctor-lab: removing loss chain {chain}: {e:#}");
        }
    }
}
