//! The agent's configuration: defaults, then a TOML file, then `NETDOCTOR_*` environment
//! variables and flags (clap reads both), each overriding the one before.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::duration::{self, AtMost, Written, HOUR};

/// Default HTTP address: loopback only, so no token is needed.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9469";
/// Default database path.
pub const DEFAULT_DATABASE: &str = "/var/lib/netdoctor/netdoctor.db";

/// The configuration file. Keys are the long flags with underscores; every key is
/// optional. Unknown keys are errors, so a typo never goes unnoticed.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    listen: Option<SocketAddr>,
    allowed_host: Option<Vec<String>>,
    token_file: Option<PathBuf>,
    database: Option<PathBuf>,
    database_group: Option<String>,
    interval: Option<Written>,
    interfaces: Option<Vec<String>>,
    exclude: Option<Vec<String>>,
    retention: Option<Written>,
    retention_rows: Option<u64>,
    rules: Option<PathBuf>,
    probe: Option<bool>,
    probe_interval: Option<Written>,
    max_peer_labels: Option<usize>,
    max_path_peers: Option<usize>,
    max_flows: Option<u32>,
}

/// Longest evaluation interval: beyond it the agent would hardly be watching.
const MAX_INTERVAL: Duration = HOUR;
/// Longest history kept.
const MAX_RETENTION: Duration = Duration::from_secs(10 * 365 * 86_400);
/// Longest time between two path-MTU probes of a tunnel.
const MAX_PROBE_INTERVAL: Duration = Duration::from_secs(7 * 86_400);

/// A duration of the file, under `key`, checked against `max`.
fn from_file(key: &str, value: Option<Written>, max: Duration) -> anyhow::Result<Option<Duration>> {
    value
        .map(|w| {
            duration::parse(&w.0, max).map_err(|e| anyhow::anyhow!("configuration key {key}: {e}"))
        })
        .transpose()
}

impl File {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading the configuration {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("configuration {}: {e}", path.display()))
    }
}

/// Flags and environment variables; each overrides the file.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct Overrides {
    /// TOML configuration file; its keys are these flags' names with underscores, e.g.
    /// `listen = "127.0.0.1:9469"`, `interfaces = ["wg*", "eth0"]`, `interval = "10s"`.
    #[arg(long, value_name = "FILE", env = "NETDOCTOR_CONFIG")]
    pub config: Option<PathBuf>,
    /// HTTP address of the API, metrics and dashboard [default: 127.0.0.1:9469]. Any
    /// address other than loopback needs --token-file.
    #[arg(long, value_name = "ADDR:PORT", env = "NETDOCTOR_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Host names the API answers to besides its address (and, on loopback, localhost),
    /// comma-separated: the names clients use, e.g. a reverse proxy's. Any other `Host`
    /// is refused, so a web page cannot read the API by rebinding its own name to this
    /// address.
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        env = "NETDOCTOR_ALLOWED_HOST"
    )]
    pub allowed_host: Vec<String>,
    /// File holding the bearer token every request must carry (except /healthz): a
    /// regular file of root's (or the agent's user's) that nobody else may write or read
    /// (mode 0600, or 0640 to share it with its group).
    #[arg(long, value_name = "FILE", env = "NETDOCTOR_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// SQLite database of findings and samples [default: /var/lib/netdoctor/netdoctor.db].
    #[arg(long, value_name = "PATH", env = "NETDOCTOR_DATABASE")]
    pub database: Option<PathBuf>,
    /// A group whose members may read the history (mode 0640); without it the database
    /// is readable by the agent's user only (0600). It holds peers' endpoints,
    /// connections and findings.
    #[arg(long, value_name = "GROUP", env = "NETDOCTOR_DATABASE_GROUP")]
    pub database_group: Option<String>,
    /// How often to evaluate every interface, e.g. 10 (seconds) or 1m [default: 10s].
    #[arg(
        long,
        value_parser = AtMost(MAX_INTERVAL),
        allow_hyphen_values = true,
        env = "NETDOCTOR_INTERVAL",
    )]
    pub interval: Option<Duration>,
    /// Interfaces to watch, as comma-separated glob patterns (e.g. "wg*,eth0")
    /// [default: every non-loopback physical, veth, bond, WireGuard, TUN/TAP, VXLAN and
    /// GENEVE interface].
    #[arg(
        long,
        value_name = "PATTERNS",
        value_delimiter = ',',
        env = "NETDOCTOR_INTERFACES"
    )]
    pub interfaces: Vec<String>,
    /// Interfaces never to watch, as comma-separated glob patterns.
    #[arg(
        long,
        value_name = "PATTERNS",
        value_delimiter = ',',
        env = "NETDOCTOR_EXCLUDE"
    )]
    pub exclude: Vec<String>,
    /// How long history is kept, e.g. 7d, 12h [default: 7d].
    #[arg(
        long,
        value_parser = AtMost(MAX_RETENTION),
        allow_hyphen_values = true,
        env = "NETDOCTOR_RETENTION",
    )]
    pub retention: Option<Duration>,
    /// At most this many samples and resolved findings are kept [default: 100000].
    #[arg(long, value_name = "ROWS", env = "NETDOCTOR_RETENTION_ROWS")]
    pub retention_rows: Option<u64>,
    /// Directory of extra rules (*.toml), as for `diagnose --rules`.
    #[arg(long, value_name = "DIR", env = "NETDOCTOR_RULES")]
    pub rules: Option<PathBuf>,
    /// Never send path-MTU probes.
    #[arg(long, env = "NETDOCTOR_NO_PROBE")]
    pub no_probe: bool,
    /// How often each tunnel's path MTU is probed, e.g. 300 (seconds) or 5m [default: 5m].
    #[arg(
        long,
        value_parser = AtMost(MAX_PROBE_INTERVAL),
        allow_hyphen_values = true,
        env = "NETDOCTOR_PROBE_INTERVAL",
    )]
    pub probe_interval: Option<Duration>,
    /// WireGuard peers get a `peer` label (their public key) only while an interface has at
    /// most this many peers [default: 16]; larger meshes get per-interface figures only.
    #[arg(long, value_name = "N", env = "NETDOCTOR_MAX_PEER_LABELS")]
    pub max_peer_labels: Option<usize>,
    /// WireGuard peers per interface whose measured path (underlay loss, handshake RTT) gets
    /// its own series [default: 256]; beyond it the lossiest keep theirs and the rest are
    /// counted in netdoctor_wireguard_path_peers_omitted.
    #[arg(long, value_name = "N", env = "NETDOCTOR_MAX_PATH_PEERS")]
    pub max_path_peers: Option<usize>,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// HTTP address.
    pub listen: SocketAddr,
    /// Extra `Host` names the API answers to.
    pub allowed_hosts: Vec<String>,
    /// Bearer token, read from the token file.
    pub token: Option<String>,
    /// Database path.
    pub database: PathBuf,
    /// Who besides the agent may read the database.
    pub database_access: crate::daemon::store::Access,
    /// Evaluation interval.
    pub interval: Duration,
    /// Include patterns (empty: by kind).
    pub interfaces: Vec<String>,
    /// Exclude patterns.
    pub exclude: Vec<String>,
    /// History retention in time.
    pub retention: Duration,
    /// History retention in rows.
    pub retention_rows: u64,
    /// Extra rules.
    pub rules: Option<PathBuf>,
    /// Path-MTU probes on.
    pub probe: bool,
    /// Probe interval per tunnel.
    pub probe_interval: Duration,
    /// Peer-label limit.
    pub max_peer_labels: usize,
    /// Peers per interface with per-peer path series.
    pub max_path_peers: usize,
    /// Flow-table size from the file (`max_flows`); the `--max-flows` flag overrides it.
    pub max_flows: Option<u32>,
}

impl Config {
    /// Defaults, then the file (if any), then the overrides. Refuses a non-loopback
    /// address without a token, and an empty or unreadable token file.
    pub fn resolve(o: &Overrides) -> anyhow::Result<Self> {
        let file = match &o.config {
            Some(path) => File::read(path)?,
            None => File::default(),
        };
        let (listen, token) = listen_and_token(o, &file)?;
        let allowed_hosts = allowed_hosts(&o.allowed_host, file.allowed_host)?;
        let database_access =
            database_access(o.database_group.as_ref().or(file.database_group.as_ref()))?;
        let config = Config {
            listen,
            allowed_hosts,
            database_access,
            token,
            database: o
                .database
                .clone()
                .or(file.database)
                .unwrap_or_else(|| DEFAULT_DATABASE.into()),
            interval: o
                .interval
                .or(from_file("interval", file.interval, MAX_INTERVAL)?)
                .unwrap_or(Duration::from_secs(10)),
            interfaces: pick(&o.interfaces, file.interfaces),
            exclude: pick(&o.exclude, file.exclude),
            retention: o
                .retention
                .or(from_file("retention", file.retention, MAX_RETENTION)?)
                .unwrap_or(Duration::from_secs(7 * 86_400)),
            retention_rows: o.retention_rows.or(file.retention_rows).unwrap_or(100_000),
            rules: o.rules.clone().or(file.rules),
            probe: !o.no_probe && file.probe.unwrap_or(true),
            probe_interval: o
                .probe_interval
                .or(from_file(
                    "probe_interval",
                    file.probe_interval,
                    MAX_PROBE_INTERVAL,
                )?)
                .unwrap_or(Duration::from_secs(300)),
            max_peer_labels: o.max_peer_labels.or(file.max_peer_labels).unwrap_or(16),
            max_path_peers: o.max_path_peers.or(file.max_path_peers).unwrap_or(256),
            max_flows: file
                .max_flows
                .map(crate::kernel::packet::flow_table::check_max_flows)
                .transpose()
                .map_err(|e| anyhow::anyhow!("configuration key max_flows: {e}"))?,
        };
        anyhow::ensure!(
            config.interval >= Duration::from_secs(1),
            "--interval must be at least 1s (got {})",
            humantime::format_duration(config.interval)
        );
        Ok(config)
    }
}

/// The flag's list when it has any entries, else the file's (else none).
fn pick(flag: &[String], file: Option<Vec<String>>) -> Vec<String> {
    if flag.is_empty() {
        file.unwrap_or_default()
    } else {
        flag.to_vec()
    }
}

/// The HTTP address and the token read from the token file (flag, then file); refuses a
/// non-loopback address without a token.
fn listen_and_token(o: &Overrides, file: &File) -> anyhow::Result<(SocketAddr, Option<String>)> {
    let listen = match o.listen.or(file.listen) {
        Some(l) => l,
        None => DEFAULT_LISTEN.parse()?,
    };
    let token = match o.token_file.as_ref().or(file.token_file.as_ref()) {
        Some(path) => Some(super::token::read(path)?),
        None => None,
    };
    if !listen.ip().is_loopback() && token.is_none() {
        anyhow::bail!(
            "refusing to listen on {listen} without a token: anyone who can reach it \
             could read this host's traffic and findings. Give --token-file FILE (a file \
             only root may read, holding a random secret, e.g. `(umask 077; openssl rand \
             -hex 32 > FILE)`), or listen on 127.0.0.1."
        );
    }
    Ok((listen, token))
}

/// The extra `Host` names (flag, then file), each checked to be a host name.
fn allowed_hosts(flag: &[String], file: Option<Vec<String>>) -> anyhow::Result<Vec<String>> {
    let allowed_hosts = pick(flag, file);
    if let Some(bad) = allowed_hosts.iter().find(|h| !valid_host_name(h)) {
        anyhow::bail!(
            "--allowed-host {bad:?} is not a host name (expected e.g. netdoctor.example.com)"
        );
    }
    Ok(allowed_hosts)
}

/// Who besides the agent may read the database: members of `group` when one is given.
fn database_access(group: Option<&String>) -> anyhow::Result<crate::daemon::store::Access> {
    Ok(match group {
        None => crate::daemon::store::Access::default(),
        Some(name) => crate::daemon::store::Access {
            group: Some(group_id(name)?),
        },
    })
}

/// The id of group `name` (a name, or a number).
fn group_id(name: &str) -> anyhow::Result<nix::unistd::Gid> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(nix::unistd::Gid::from_raw(n));
    }
    match nix::unistd::Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid),
        Ok(None) => anyhow::bail!("--database-group {name:?}: no such group"),
        Err(e) => anyhow::bail!("--database-group {name:?}: looking up the group: {e}"),
    }
}

/// A DNS name or an address literal (IPv6 with or without brackets), without scheme,
/// path or port.
fn valid_host_name(name: &str) -> bool {
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    bare.parse::<std::net::IpAddr>().is_ok()
        || (!name.is_empty()
            && name.len() <= 253
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
}

#[cfg(test)]
mod tests;
