//! `netdoctor wireguard IFACE`: the WireGuard state netdoctor reads, as JSON.

use std::process::ExitCode;

use super::WireguardArgs;
use crate::facts::wireguard;

pub(super) async fn run(args: WireguardArgs) -> anyhow::Result<ExitCode> {
    let device = wireguard::query(&args.interface)
        .await
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.interface))?
        .ok_or_else(|| anyhow::anyhow!("{}: not a WireGuard interface", args.interface))?;
    println!("{}", serde_json::to_string_pretty(&device)?);
    Ok(ExitCode::SUCCESS)
}
