//! `netdoctor wireguard IFACE`: the WireGuard state netdoctor reads, as JSON.

use std::process::ExitCode;

use super::WireguardArgs;
use crate::config::wireguard::{self, tailscale};

pub(super) async fn run(args: WireguardArgs) -> anyhow::Result<ExitCode> {
    let name = &args.interface;
    let device = match tailscale::daemon_of(name) {
        Some(daemon) => Some(
            tailscale::read(name, &daemon)
                .await
                .map_err(|e| anyhow::anyhow!("{name}: tailscaled: {e}"))?
                .0,
        ),
        None => wireguard::query(name)
            .await
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?,
    }
    .ok_or_else(|| anyhow::anyhow!("{name}: not a WireGuard interface"))?;
    println!("{}", serde_json::to_string_pretty(&device)?);
    Ok(ExitCode::SUCCESS)
}
