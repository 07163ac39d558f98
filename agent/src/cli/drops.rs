//! `netdoctor drops`: packets the kernel dropped, by interface and reason.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::time::Instant;

use serde::Serialize;

use super::shutdown::Interrupts;
use super::table::{human_bytes, right_align, table};
use super::{observe, DropsArgs};
use crate::config::iface;
use crate::kernel::drops::{self, DropCount, DropProbe};

/// What `netdoctor drops` reports (also its `--json` document).
#[derive(Debug, Serialize)]
pub struct DropsReport {
    /// Observation time in seconds.
    pub duration_s: f64,
    /// Drops during the window, most first, with interface names.
    pub drops: Vec<NamedDrop>,
    /// Drops that did not fit the kernel table (counted, not classified).
    pub unclassified: u64,
    /// Whether this kernel reports drop reasons (Linux 5.17's kfree_skb `reason`); when
    /// false every drop's reason is `UNKNOWN`.
    pub reasons: bool,
}

/// A drop count with its interface's name.
#[derive(Debug, Serialize)]
pub struct NamedDrop {
    /// Interface name ("-" when the packet had no device).
    pub interface: String,
    /// The counts.
    #[serde(flatten)]
    pub count: DropCount,
}

pub(super) async fn run(args: DropsArgs, interrupts: Interrupts) -> anyhow::Result<ExitCode> {
    let names: HashMap<u32, String> = iface::list()
        .await?
        .into_iter()
        .map(|i| (i.index, i.name))
        .collect();
    let only = match &args.interface {
        Some(name) => Some(
            names
                .iter()
                .find(|(_, n)| *n == name)
                .map(|(i, _)| *i)
                .ok_or_else(|| crate::config::Error::UnknownInterface(name.clone()))?,
        ),
        None => None,
    };
    let mut storage = MaybeUninit::uninit();
    let Some(probe) = DropProbe::load(&mut storage)? else {
        anyhow::bail!(
            "this kernel has no kfree_skb BTF tracepoint (Linux >= 5.17 needed for drop reasons)"
        );
    };
    if !probe.has_reasons() {
        eprintln!("netdoctor: this kernel's kfree_skb tracepoint reports no drop reason (Linux < 5.17): drops are counted with reason {}", drops::NO_REASON);
    }
    eprintln!(
        "netdoctor: counting kernel drops{} for {}; Ctrl-C stops early",
        args.interface
            .as_deref()
            .map(|i| format!(" on {i}"))
            .unwrap_or_default(),
        humantime::format_duration(args.duration)
    );
    let before = probe.counts()?;
    let overflow_before = probe.overflow();
    let started = Instant::now();
    observe(args.duration, &interrupts, || {}).await;
    let after = probe.counts()?;
    let report = DropsReport {
        duration_s: started.elapsed().as_secs_f64(),
        drops: drops::delta(&before, &after)
            .into_iter()
            .filter(|d| only.is_none_or(|i| d.ifindex == i))
            .map(|count| NamedDrop {
                interface: names
                    .get(&count.ifindex)
                    .cloned()
                    .unwrap_or_else(|| "-".into()),
                count,
            })
            .collect(),
        unclassified: probe.overflow().saturating_sub(overflow_before),
        reasons: probe.has_reasons(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_drops(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the report of `netdoctor drops`.
pub(super) fn print_drops(r: &DropsReport) {
    if r.drops.is_empty() {
        println!("No drops in {:.1}s.", r.duration_s);
    } else {
        println!("Kernel drops in {:.1}s:", r.duration_s);
        let mut t = table(&["interface", "reason", "protocol", "packets", "bytes"]);
        for d in &r.drops {
            let c = &d.count;
            let proto = match (c.ethertype, c.protocol) {
                (0x0800 | 0x86dd, 6) => "tcp".to_string(),
                (0x0800 | 0x86dd, 17) => "udp".to_string(),
                (0x0800, 1) => "icmp".to_string(),
                (0x86dd, 58) => "icmpv6".to_string(),
                (0x0806, _) => "arp".to_string(),
                (e, p) => format!("0x{e:04x}/{p}"),
            };
            t.add_row(vec![
                d.interface.clone(),
                c.reason.clone(),
                proto,
                c.packets.to_string(),
                human_bytes(c.bytes),
            ]);
        }
        right_align(&mut t, 3);
        println!("{t}");
    }
    if r.unclassified > 0 {
        println!(
            "{} more drops did not fit the kernel table and are not classified.",
            r.unclassified
        );
    }
}
