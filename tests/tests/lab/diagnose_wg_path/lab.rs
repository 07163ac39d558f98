//! The labs the subjects share: a wireguard-go tunnel between the two ends of a veth pair,
//! or between a client and a server through a forwarding router (where a fault can hit one
//! direction after both ends' hooks saw the packets leave); and the path facts of a
//! report's only peer.

use anyhow::{ensure, Context, Result};
use netdoctor_lab::diagnosis::Diagnosis;
use netdoctor_lab::{LineConfig, LineTopology, Netns, PairTopology, WgConfig, WgTunnel};
use serde_json::Value;

/// The underlay under the tunnel.
pub(crate) enum Underlay {
    /// a — b over one veth.
    Pair(PairTopology),
    /// a (the client) — router — b (the server).
    Line(LineTopology),
    /// The same with the tunnel over IPv6 (the endpoints are the IPv6 addresses).
    Line6(LineTopology),
}

/// A wireguard-go tunnel over a 1500-byte underlay (a initiated its handshake).
pub(crate) struct Lab {
    // Declared first: dropped (wireguard-go stopped) before the namespaces.
    pub wg: WgTunnel,
    pub underlay: Underlay,
}

impl Lab {
    /// The tunnel over a veth pair.
    pub(crate) fn over_pair() -> Result<Lab> {
        let (pair, wg) = netdoctor_lab::wg_over_pair(1500, WgConfig::default().mtu)?;
        Ok(Lab {
            wg,
            underlay: Underlay::Pair(pair),
        })
    }

    /// The tunnel through a forwarding router.
    pub(crate) fn over_router() -> Result<Lab> {
        let line = LineTopology::new(&LineConfig::default())?;
        let wg = WgTunnel::new(
            &line.client,
            LineTopology::CLIENT_IP,
            &line.server,
            LineTopology::SERVER_IP,
            &WgConfig::default(),
        )?;
        Ok(Lab {
            wg,
            underlay: Underlay::Line(line),
        })
    }

    /// The tunnel over IPv6 through a forwarding router (IPv4 inside).
    pub(crate) fn over_router6() -> Result<Lab> {
        let line = LineTopology::new(&LineConfig::default())?;
        line.add_ipv6()?;
        let wg = WgTunnel::new(
            &line.client,
            LineTopology::CLIENT_IP6,
            &line.server,
            LineTopology::SERVER_IP6,
            &WgConfig::default(),
        )?;
        Ok(Lab {
            wg,
            underlay: Underlay::Line6(line),
        })
    }

    /// a's namespace.
    pub(crate) fn a(&self) -> &Netns {
        match &self.underlay {
            Underlay::Pair(p) => &p.a,
            Underlay::Line(l) | Underlay::Line6(l) => &l.client,
        }
    }

    /// b's namespace.
    pub(crate) fn b(&self) -> &Netns {
        match &self.underlay {
            Underlay::Pair(p) => &p.b,
            Underlay::Line(l) | Underlay::Line6(l) => &l.server,
        }
    }

    /// a's underlay interface.
    pub(crate) fn a_if(&self) -> &'static str {
        match &self.underlay {
            Underlay::Pair(_) => PairTopology::IFNAME,
            Underlay::Line(_) | Underlay::Line6(_) => LineTopology::CLIENT_IF,
        }
    }

    /// a's underlay address.
    pub(crate) fn a_ip(&self) -> &'static str {
        match &self.underlay {
            Underlay::Pair(_) => PairTopology::A_IP,
            Underlay::Line(_) => LineTopology::CLIENT_IP,
            Underlay::Line6(_) => LineTopology::CLIENT_IP6,
        }
    }

    /// b's underlay address.
    pub(crate) fn b_ip(&self) -> &'static str {
        match &self.underlay {
            Underlay::Pair(_) => PairTopology::B_IP,
            Underlay::Line(_) => LineTopology::SERVER_IP,
            Underlay::Line6(_) => LineTopology::SERVER_IP6,
        }
    }

    /// a's WireGuard endpoint as b sees it: `ip:port`, `[ip]:port` for IPv6.
    pub(crate) fn a_endpoint(&self) -> String {
        match &self.underlay {
            Underlay::Line6(_) => format!("[{}]:{}", self.a_ip(), self.wg.a.listen_port()),
            _ => format!("{}:{}", self.a_ip(), self.wg.a.listen_port()),
        }
    }

    /// Makes a forget b and learn it again: a's next packet to b starts a fresh handshake
    /// (a initiates, b responds), as a rekey would.
    pub(crate) fn renew_session(&self) -> Result<()> {
        self.wg.renew_session(self.b_ip())
    }
}

/// The report's only peer, with its path facts.
pub(crate) fn peer(d: &Diagnosis) -> Result<&Value> {
    let peers = d.fact("peers").as_array().context("facts.peers")?;
    ensure!(peers.len() == 1, "one peer expected:\n{}", d.describe());
    Ok(&peers[0])
}

/// A number of the only peer's facts.
pub(crate) fn peer_f64(d: &Diagnosis, key: &str) -> Result<f64> {
    peer(d)?[key]
        .as_f64()
        .with_context(|| format!("peers[0].{key}:\n{}", d.describe()))
}

/// An integer of the only peer's facts.
pub(crate) fn peer_i64(d: &Diagnosis, key: &str) -> Result<i64> {
    peer(d)?[key]
        .as_i64()
        .with_context(|| format!("peers[0].{key}:\n{}", d.describe()))
}
