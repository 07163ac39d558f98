//! The WireGuard path in human units, for `diagnose` and `flows`: the loss of what a peer
//! sends (measured where it arrives, on this host's underlay) and the round trip of its
//! latest handshake.

use super::flows_report::{FlowsReport, TunnelPeers};
use super::table::{human_bytes, right_align, table};
use crate::facts::PeerFacts;
use crate::kernel::packet::wg_path::EndpointPath;
use crate::rules::units::count;

/// "5.1 % (510 of 10,020 lost)", "0 % (of 812)", or "-" when nothing was expected.
pub(super) fn loss(expected: u64, lost: u64, percent: f64) -> String {
    if expected == 0 || percent < 0.0 {
        return "-".into();
    }
    let p = if percent == 0.0 {
        "0".to_owned()
    } else if percent < 0.1 {
        format!("{percent:.2}")
    } else {
        format!("{percent:.1}")
    };
    let n = |v: u64| count(v as f64);
    if lost == 0 {
        format!("{p} % (of {})", n(expected))
    } else {
        format!("{p} % ({} of {} lost)", n(lost), n(expected))
    }
}

/// "50.2 ms (12 s ago)", or "-" without a timed handshake.
pub(super) fn rtt(ms: f64, age_s: i64) -> String {
    if ms < 0.0 {
        return "-".into();
    }
    format!("{ms:.1} ms ({age_s} s ago)")
}

/// A peer's path facts as one line (`diagnose`), if the data plane measured them.
pub(super) fn peer_line(p: &PeerFacts) -> Option<String> {
    if p.underlay_expected < 0 {
        return None;
    }
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    Some(format!(
        "path from the peer: loss {}, handshake RTT {}",
        loss(
            n(p.underlay_expected),
            n(p.underlay_lost),
            p.underlay_loss_percent
        ),
        rtt(p.rtt_ms, p.rtt_age_s)
    ))
}

/// The row of `paths` for a peer at `endpoint` ("" if none).
pub(super) fn for_endpoint<'a>(
    paths: &'a [EndpointPath],
    endpoint: &str,
) -> Option<&'a EndpointPath> {
    paths.iter().find(|r| r.endpoint.to_string() == endpoint)
}

/// What `flows` measured from endpoints that are not a configured peer of the interface
/// (all of them when the interface is an underlay).
pub(super) fn print_unmatched(r: &FlowsReport) {
    let known = |e: &EndpointPath| {
        r.tunnel
            .as_ref()
            .is_some_and(|t: &TunnelPeers| t.peers.iter().any(|p| p.endpoint == Some(e.endpoint)))
    };
    let rows: Vec<&EndpointPath> = r.wireguard_paths.iter().filter(|e| !known(e)).collect();
    if rows.is_empty() {
        return;
    }
    println!("\nWireGuard received, by sending endpoint (loss measured from its counters):");
    let mut t = table(&["from", "sessions", "messages", "loss", "handshake RTT"]);
    for e in rows {
        t.add_row(vec![
            e.endpoint.to_string(),
            e.sessions.to_string(),
            e.received.to_string(),
            loss(e.expected, e.lost, e.loss_percent),
            rtt(e.rtt_ms, e.rtt_age_s),
        ]);
    }
    right_align(&mut t, 1);
    println!("{t}");
}

/// The WireGuard peers of the tunnel interface: path, handshake, bytes, measured loss and RTT.
pub(super) fn print_peers(name: &str, tp: &TunnelPeers, paths: &[EndpointPath]) {
    let by = if tp.daemon.is_empty() {
        String::new()
    } else {
        format!(", {}", tp.daemon)
    };
    println!(
        "\nWireGuard peers of {name} (port {}{by}): {}",
        tp.port,
        tp.peers.len()
    );
    let mut t = table(&[
        "peer",
        "host",
        "path",
        "handshake",
        "rx",
        "tx",
        "loss from peer",
        "handshake RTT",
    ]);
    let now = crate::facts::handshake::now_unix();
    for p in &tp.peers {
        let ts = tp.paths.iter().find(|x| x.public_key == p.public_key);
        let endpoint = p.endpoint.map(|e| e.to_string());
        let measured = endpoint.as_deref().and_then(|e| for_endpoint(paths, e));
        let path = match (ts.map(|x| x.path.name()), endpoint) {
            (Some("derp"), _) => format!(
                "DERP relay ({})",
                ts.map(|x| x.derp_region.as_str()).unwrap_or_default()
            ),
            (Some("peer_relay"), _) => "peer relay".to_owned(),
            (_, Some(e)) => format!("direct {e}"),
            (_, None) => "-".to_owned(),
        };
        t.add_row(vec![
            p.public_key.clone(),
            ts.map(|x| x.host.clone()).unwrap_or_default(),
            path,
            match p.last_handshake_unix {
                0 => "never".to_owned(),
                at => format!("{} s ago", (now - at as i64).max(0)),
            },
            human_bytes(p.rx_bytes),
            human_bytes(p.tx_bytes),
            measured.map_or_else(|| "-".into(), |m| loss(m.expected, m.lost, m.loss_percent)),
            measured.map_or_else(|| "-".into(), |m| rtt(m.rtt_ms, m.rtt_age_s)),
        ]);
    }
    right_align(&mut t, 3);
    println!("{t}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_in_units() {
        assert_eq!(loss(10_020, 510, 5.0898), "5.1 % (510 of 10,020 lost)");
        assert_eq!(loss(812, 0, 0.0), "0 % (of 812)");
        assert_eq!(loss(20_000, 9, 0.045), "0.04 % (9 of 20,000 lost)");
        assert_eq!(loss(0, 0, -1.0), "-");
        assert_eq!(rtt(50.24, 12), "50.2 ms (12 s ago)");
        assert_eq!(rtt(-1.0, -1), "-");
    }
}
