//! `netdoctor probe TARGET`: the active path-MTU probe on its own.

use std::process::ExitCode;

use super::ProbeArgs;
use crate::facts::probe::{self, targets, ProbeOptions};

pub(super) async fn run(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let route = crate::config::route::get(args.target).await?;
    if let Some(why) = targets::unprobeable(&route) {
        anyhow::bail!(why);
    }
    let max_size = match args.max_size {
        Some(m) => {
            anyhow::ensure!(
                (68..=65535).contains(&m),
                "--max-size {m} is out of range: give 68 to 65535 bytes"
            );
            m
        }
        // An IP packet has at most 65535 bytes, whatever the device's MTU.
        None => route.mtu.clamp(68, 65535),
    };
    let options = ProbeOptions {
        max_size,
        timeout: args.timeout,
        ..ProbeOptions::default()
    };
    eprintln!(
        "netdoctor: probing the path MTU toward {} (sizes up to {max_size})",
        args.target
    );
    let target = args.target;
    let result = tokio::task::spawn_blocking(move || probe::probe(target, &options)).await??;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(ExitCode::SUCCESS);
    }
    match result.path_mtu {
        None => println!(
            "{}: no answer even to {}-byte probes; the host is down or filters ICMP echo, so nothing can be concluded",
            result.target,
            if result.target.is_ipv4() { 576 } else { 1280 }
        ),
        Some(mtu) => {
            println!("{}: path MTU {mtu} (largest size tried {})", result.target, result.max_size);
            for r in &result.too_big {
                println!("  {} reported \"too big\" with next-hop MTU {}", r.from, r.mtu);
            }
            if result.lossy {
                println!("  the path loses packets at random (even sizes that passed were lost): the figure is a lower bound");
            }
            if result.blackhole {
                println!(
                    "  BLACKHOLE: packets larger than {mtu} vanish without any ICMP too-big report; TCP will stall on full-size segments"
                );
            }
        }
    }
    println!("  ({} probes, {} ms)", result.probes, result.elapsed_ms);
    Ok(ExitCode::SUCCESS)
}
