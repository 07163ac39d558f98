//! Tailscale: `tailscaled` runs WireGuard in userspace on a TUN device (`tailscale0`), and
//! tells what it knows of its peers through its LocalAPI, HTTP over a unix socket.
//!
//! netdoctor recognises the device by the process holding it (command `tailscaled`,
//! running as root or as netdoctor's user by its real, effective and saved uids), takes the socket's path from that process's
//! command line (`--socket`, else tailscaled's default), reaches it through the
//! process's root directory (`/proc/PID/root`, so a daemon in a container is found too)
//! and asks it only if root or netdoctor's user owns it. The `tailscale` command is never
//! run.

mod localapi;
pub mod status;

use std::path::{Path, PathBuf};

use crate::config::process::{self, TunOwner};
use crate::config::wireguard::Device;

pub use status::{Paths, PeerPath};

/// tailscaled's command name (`/proc/PID/comm`).
pub const COMMAND: &str = "tailscaled";

/// tailscaled's socket when `--socket` is not given, on Linux (`paths.DefaultTailscaledSocket`).
pub const DEFAULT_SOCKET: &str = "/var/run/tailscale/tailscaled.sock";

/// The UDP port Tailscale's packages configure (`PORT` in /etc/default/tailscaled, passed
/// as `--port`); tailscaled itself picks a random port when given none.
pub const DEFAULT_PORT: u16 = 41641;

/// What can go wrong asking tailscaled.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket belongs to another user.
    #[error("{0} belongs to uid {1}, not root: not asked")]
    Untrusted(PathBuf, u32),
    /// The process listening on the socket runs as another user.
    #[error("{0}: {1}: not asked")]
    UntrustedListener(PathBuf, crate::config::trusted::Untrusted),
    /// Something else than a socket is at the path.
    #[error("{0} is not a socket")]
    NotASocket(PathBuf),
    /// The socket could not be reached.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// The HTTP exchange failed.
    #[error("LocalAPI {0}: {1}")]
    Http(String, String),
    /// tailscaled answered with an error.
    #[error("LocalAPI {0} answered {1}: {2}")]
    Status(String, u16, String),
    /// tailscaled did not answer in time.
    #[error("LocalAPI {0}: no answer within {1:?}")]
    Timeout(String, std::time::Duration),
    /// The answer is not the document expected.
    #[error("LocalAPI {0}: {1}")]
    Json(String, serde_json::Error),
}

/// The tailscaled serving a TUN device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Daemon {
    /// The process.
    pub owner: TunOwner,
    /// Its LocalAPI socket, as reached from here.
    pub socket: PathBuf,
    /// Its UDP port (0 if unknown).
    pub port: u16,
}

/// The tailscaled serving TUN device `ifname` in this network namespace, if one does and
/// runs as root or as netdoctor's user by every uid (anyone else could name a process
/// `tailscaled`, a setuid-root program they start included).
pub fn daemon_of(ifname: &str) -> Option<Daemon> {
    let owner = process::tun_owner_named(ifname, COMMAND)?;
    if !owner.uids.trusted() {
        return None;
    }
    Some(Daemon {
        socket: socket_path(&owner),
        port: port(&owner),
        owner,
    })
}

/// Whether tailscaled serves TUN device `ifname` (see [`daemon_of`]).
pub fn serves(ifname: &str) -> bool {
    daemon_of(ifname).is_some()
}

/// The value of flag `name` in a Go command line: `-name V`, `--name V`, `-name=V` or
/// `--name=V`; the last one given wins, as with Go's `flag` package.
fn flag(args: &[String], name: &str) -> Option<String> {
    let mut value = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let Some(rest) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            continue;
        };
        if rest == name {
            value = it.next().cloned();
        } else if let Some(v) = rest.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
            value = Some(v.to_owned());
        }
    }
    value
}

/// The daemon's socket (`--socket`, else the default) under its root directory; a
/// relative path under its working directory.
fn socket_path(owner: &TunOwner) -> PathBuf {
    let given = flag(&owner.args, "socket").unwrap_or_else(|| DEFAULT_SOCKET.to_owned());
    let proc = PathBuf::from(format!("/proc/{}", owner.pid));
    match given.strip_prefix('/') {
        Some(absolute) => proc.join("root").join(absolute),
        None => proc.join("cwd").join(given),
    }
}

/// `--port` when given and not 0; else the Tailscale packages' default if the daemon has it
/// open; else the UDP port it has open (it binds one for IPv4 and IPv6).
fn port(owner: &TunOwner) -> u16 {
    if let Some(p) = flag(&owner.args, "port")
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p != 0)
    {
        return p;
    }
    if owner.udp_ports.contains(&DEFAULT_PORT) {
        return DEFAULT_PORT;
    }
    owner.udp_ports.first().copied().unwrap_or(0)
}

/// Reads the peers (as a WireGuard device named `ifname`) and their paths from `daemon`.
pub async fn read(ifname: &str, daemon: &Daemon) -> Result<(Device, Paths), Error> {
    read_socket(ifname, daemon.port, &daemon.socket).await
}

/// [`read`] from the socket at `socket`.
pub async fn read_socket(ifname: &str, port: u16, socket: &Path) -> Result<(Device, Paths), Error> {
    let status: status::Status = localapi::get(socket, "status?peers=true").await?;
    let derp: status::DerpMap = localapi::get(socket, "derpmap").await?;
    Ok(status::read(ifname, port, &status, &derp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(args: &[&str], udp_ports: &[u16]) -> TunOwner {
        TunOwner {
            pid: 42,
            command: COMMAND.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            uids: crate::config::trusted::Uids::all(0),
            udp_ports: udp_ports.to_vec(),
        }
    }

    #[test]
    fn socket_and_port_come_from_the_command_line() {
        let o = owner(
            &[
                "/usr/sbin/tailscaled",
                "--state=/var/lib/tailscale/tailscaled.state",
                "--socket=/run/tailscale/tailscaled.sock",
                "--port=41641",
            ],
            &[41641, 50000],
        );
        assert_eq!(
            socket_path(&o),
            Path::new("/proc/42/root/run/tailscale/tailscaled.sock")
        );
        assert_eq!(port(&o), 41641);
        let o = owner(
            &["tailscaled", "-socket", "ts.sock", "-port", "0"],
            &[40000],
        );
        assert_eq!(socket_path(&o), Path::new("/proc/42/cwd/ts.sock"));
        assert_eq!(port(&o), 40000, "--port=0: the port tailscaled picked");
        let o = owner(&["tailscaled", "--tun=ts-a"], &[]);
        assert_eq!(
            socket_path(&o),
            Path::new("/proc/42/root/var/run/tailscale/tailscaled.sock")
        );
        assert_eq!(port(&o), 0);
        assert_eq!(flag(&o.args, "tun").as_deref(), Some("ts-a"));
        assert_eq!(flag(&o.args, "tu"), None);
    }
}
