//! The local TCP connections through an interface as facts ([`FlowFacts`]), each beside
//! what loss-based congestion control can sustain on its path and what the path delivered.
//!
//! Mathis, Semke, Mahdavi and Ott, "The macroscopic behavior of the TCP congestion
//! avoidance algorithm" (SIGCOMM CCR 27(3), 1997): a Reno-style connection losing a
//! fraction `p` of its segments at round-trip time `RTT` moves at most about
//! `MSS / RTT · C / √p` with `C = √(3/2) ≈ 1.22` (periodic loss, delayed ACKs off). CUBIC
//! halves its window less and grows it faster, but on a lossy path it too is bounded by
//! its loss rate, which BBR does not read as congestion.

use std::net::IpAddr;

use super::FlowFacts;
use crate::kernel::sockets::rates::SocketRow;

/// √(3/2): Mathis et al.'s constant for periodic loss without delayed ACKs.
const MATHIS_C: f64 = 1.224_744_871;

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The rate in bits per second a loss-based congestion control can sustain with segments
/// of `mss` bytes at `srtt_s` seconds of round trip and a fraction `loss` of segments lost;
/// `None` without loss or a round-trip time (nothing bounds it then).
pub fn mathis_bps(mss: u32, srtt_s: f64, loss: f64) -> Option<f64> {
    (mss > 0 && srtt_s > 0.0 && loss > 0.0)
        .then(|| f64::from(mss) * 8.0 / srtt_s * MATHIS_C / loss.sqrt())
}

/// The connections among `rows` leaving through interface `ifindex`.
pub fn flow_facts(rows: &[SocketRow], ifindex: u32) -> Vec<FlowFacts> {
    let mine: Vec<&SocketRow> = rows
        .iter()
        .filter(|r| r.socket.ifindex == ifindex)
        .collect();
    let to_host = |host: IpAddr| mine.iter().filter(move |r| r.socket.remote.ip() == host);
    mine.iter()
        .map(|r| {
            let host = r.socket.remote.ip();
            let srtt_s = f64::from(r.socket.srtt_us) / 1e6;
            FlowFacts {
                name: format!("{} -> {}", r.socket.local, r.socket.remote),
                cc: r.socket.cc.clone(),
                data_segs_sent: to_i64(r.data_segs_sent),
                retransmits: to_i64(r.retransmits),
                retrans_ratio: r.retrans_ratio,
                full_size_retransmits: to_i64(r.full_size_retransmits),
                small_retransmits: to_i64(r.small_retransmits),
                pmtu: i64::from(r.socket.pmtu),
                mss: i64::from(r.socket.mss),
                srtt_ms: srtt_s * 1000.0,
                throughput_bps: r.throughput_bps,
                loss_based_limit_bps: mathis_bps(r.socket.mss, srtt_s, r.retrans_ratio)
                    .unwrap_or(-1.0),
                host_throughput_bps: to_host(host).map(|o| o.throughput_bps).sum(),
                host_bbr_bps: to_host(host)
                    .filter(|o| o.socket.cc == "bbr")
                    .map(|o| o.throughput_bps)
                    .reduce(f64::max)
                    .unwrap_or(-1.0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a 1448-byte MSS: 62 ms and 4.8 % loss, about 1.0 Mbit/s; 50 ms and 1 %, 2.8
    /// Mbit/s (the seed's lab measured cubic at 3.2 there); 200 ms and 1 %, 0.7 Mbit/s.
    #[test]
    fn mathis_rates() {
        let mbit = |mss, rtt, p| mathis_bps(mss, rtt, p).map(|b| (b / 1e5).round() / 10.0);
        assert_eq!(mbit(1448, 0.062, 0.048), Some(1.0));
        assert_eq!(mbit(1448, 0.050, 0.01), Some(2.8));
        assert_eq!(mbit(1448, 0.2, 0.01), Some(0.7));
        assert_eq!(mathis_bps(1448, 0.05, 0.0), None);
        assert_eq!(mathis_bps(1448, 0.0, 0.01), None);
    }
}
