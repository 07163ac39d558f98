//! The tunnel's datagrams as the receiving underlay sees them: nft counters per outer IP
//! length and of fragments.

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};
use netdoctor_lab::{Netns, PairTopology};
use serde_json::Value;

use crate::diagnose_tap_mesh::config::{write, UNDERLAY_MTU};

/// Outer packet sizes of the tunnel's UDP datagrams from one sender, counted by nft on the
/// receiver's underlay ingress (netdev family, before anything else touches them).
#[derive(Debug)]
pub(crate) struct WireSizes<'a> {
    ns: &'a Netns,
}

/// What [`WireSizes`] counted.
#[derive(Debug, Clone, Default)]
pub(crate) struct WireCount {
    /// Unfragmented datagrams per outer IP length (only lengths >= [`WIRE_MIN_LEN`]).
    pub(crate) by_len: BTreeMap<i64, u64>,
    /// IP fragments (first and later) from the sender.
    pub(crate) fragments: u64,
}

const WIRE_TABLE: &str = "ndwire";
const WIRE_CHAIN: &str = "in_eth0";
const WIRE_MIN_LEN: i64 = 1301;

impl<'a> WireSizes<'a> {
    pub(crate) fn install(ns: &'a Netns, from: &str, port: u16) -> Result<WireSizes<'a>> {
        let mut script = format!(
            "table netdev {WIRE_TABLE} {{\n chain {WIRE_CHAIN} {{\n  type filter hook ingress \
             device \"{}\" priority -10; policy accept;\n  ip saddr {from} ip frag-off & 0x3fff != 0 counter\n",
            PairTopology::IFNAME
        );
        for len in WIRE_MIN_LEN..=UNDERLAY_MTU {
            script.push_str(&format!(
                "  ip saddr {from} ip frag-off & 0x3fff == 0 udp dport {port} ip length {len} counter\n"
            ));
        }
        script.push_str(" }\n}\n");
        let file = tempfile::Builder::new()
            .prefix("ndlab-wire-")
            .suffix(".nft")
            .tempfile()
            .context("creating nft script")?;
        write(file.path(), &script)?;
        ns.run(&["nft", "-f", &file.path().to_string_lossy()])
            .context("installing the wire-size counters")?;
        Ok(WireSizes { ns })
    }

    pub(crate) fn read(&self) -> Result<WireCount> {
        let out = self.ns.run(&[
            "nft", "-j", "list", "chain", "netdev", WIRE_TABLE, WIRE_CHAIN,
        ])?;
        let v: Value = serde_json::from_str(&out).context("parsing `nft -j list chain`")?;
        let mut count = WireCount::default();
        let rules = v
            .get("nftables")
            .and_then(Value::as_array)
            .context("nft JSON without `nftables`")?
            .iter()
            .filter_map(|o| o.get("rule")?.get("expr")?.as_array());
        for expr in rules {
            let packets = expr
                .iter()
                .find_map(|e| e.get("counter")?.get("packets")?.as_u64())
                .context("wire rule without counter")?;
            let len = expr.iter().find_map(|e| {
                let m = e.get("match")?;
                (m.pointer("/left/payload/field")?.as_str()? == "length")
                    .then(|| m.get("right")?.as_i64())
                    .flatten()
            });
            match len {
                Some(len) => {
                    count.by_len.insert(len, packets);
                }
                None => count.fragments += packets,
            }
        }
        ensure!(
            count.by_len.len() == (UNDERLAY_MTU - WIRE_MIN_LEN + 1) as usize,
            "expected one counter per length, got {}",
            count.by_len.len()
        );
        Ok(count)
    }
}

impl WireCount {
    /// The outer IP length of most datagrams: the full-size packets of a bulk transfer
    /// (tinc's PMTU probes come in other sizes, a few at a time).
    pub(crate) fn dominant_outer(&self) -> Option<i64> {
        self.by_len
            .iter()
            .filter(|(_, &n)| n > 0)
            .max_by_key(|(_, &n)| n)
            .map(|(&len, _)| len)
    }

    pub(crate) fn describe(&self) -> String {
        let top: Vec<String> = self
            .by_len
            .iter()
            .rev()
            .filter(|(_, &n)| n > 0)
            .take(4)
            .map(|(len, n)| format!("{n}x{len}"))
            .collect();
        format!(
            "largest unfragmented outer datagrams {} (IP bytes), {} fragments",
            if top.is_empty() {
                "none".to_owned()
            } else {
                top.join(", ")
            },
            self.fragments
        )
    }
}
