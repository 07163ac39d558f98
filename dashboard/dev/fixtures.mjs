// DEVELOPMENT AID, NOT A TEST OF THE PRODUCT: invented API answers shaped like docs/api.md,
// so the dashboard can be worked on without root, BPF or a lab. Nothing here is evidence
// that the agent provides these fields; the real check is e2e/e2e.mjs against a real
// agent (run by the Rust integration test in a network-namespace lab).

const WG_KEY = 'drP/h71bJzN1lE4Hx0Tq1pLx2mJgD9yq0hG2xJmY0Wk=';
const WG_KEY2 = 'Qm9iIGlzIGEgd2lyZWd1YXJkIHBlZXIga2V5IDEyMzQ=';

function counters() {
  const dir = (k) => ({
    packets: 1000 * k, segments: 1200 * k, bytes: 1500000 * k,
    size_buckets: [10, 5, 3, 200 * k, 2, 1, 400 * k, 3, 0, 0],
    non_ip: 0, truncated: 0, gso_packets: 5, fragments_first: 0, fragments_later: 0,
    df_over_mtu: 0, icmp_frag_needed: 0, icmp6_packet_too_big: 0,
  });
  return { ingress: dir(3), egress: dir(7) };
}

function host() {
  return {
    cc_default: 'cubic', cc_available: ['reno', 'cubic', 'bbr'], bbr_available: true,
    tcp_mtu_probing: 0, ip_forward: true, ip6_forward: false, rp_filter_all: 0,
    rp_filter_iface: 0, rp_filter: 0, mss_clamping: false, fib_multipath_hash_policy: 0,
  };
}

function facts(name, kind, mtu, tunnel, peers, retrans) {
  return {
    iface: { name, index: 7, kind, mtu, up: true, addresses: ['10.250.0.1/24'], is_tunnel: Boolean(tunnel), lan_mtu: 1500 },
    tunnel: tunnel || {
      present: false, kind: '', family: '', overhead_expected: -1, overhead_measured: -1, underlay_iface: '',
      underlay_mtu: -1, path_mtu: -1, effective_underlay_mtu: -1, max_mtu: -1, port: 0, endpoints: [], daemon: '',
      underlay_fragments: 0, underlay_bond_policy: '', underlay_bond_mode: '',
    },
    peers: peers || [],
    host: host(),
    traffic: {
      duration_s: 10, rx_segments: 9315, tx_segments: 70527, df_over_mtu: 0, fragments: 0, too_big_received: 0,
      max_segment_out: mtu, syn_mss_max: mtu - 40, mss_limit: mtu - 40, syn_mss_over_limit: 0,
      tcp_segments: 79842, tcp_retransmits: Math.round(79842 * retrans), tcp_retrans_ratio: retrans,
    },
    flows: [],
    drops: { total: 1, forwarding: 0, rpfilter: 0, too_big: 0, by_reason: { NETFILTER_DROP: 1 } },
    probe: { ran: Boolean(tunnel), target: tunnel ? '192.0.2.2' : '', path_mtu: tunnel ? 1500 : -1, blackhole: false, too_big_reported: false, lossy: false },
  };
}

export function interfaces(now) {
  const wgTunnel = {
    present: true, kind: 'wireguard', family: 'ipv4', overhead_expected: 60, overhead_measured: -1,
    underlay_iface: 'eth0', underlay_mtu: 1500, path_mtu: 1500, effective_underlay_mtu: 1500, max_mtu: 1440,
    port: 51820, endpoints: ['192.0.2.2:51820', '198.51.100.9:51820'], daemon: '', underlay_fragments: 139562,
    underlay_bond_policy: '', underlay_bond_mode: '',
  };
  const wgPeers = [
    { name: WG_KEY, endpoint: '192.0.2.2:51820', family: 'ipv4', allowed_ips: ['10.250.0.2/32'], handshake_age_s: 5, keepalive_s: 25, tx_bytes_delta: 14500000, rx_bytes_delta: 420000, initiations_sent: 0, responses_received: 0, path_mtu: 1500, blackhole: false },
    { name: WG_KEY2, endpoint: '198.51.100.9:51820', family: 'ipv4', allowed_ips: ['10.250.0.3/32'], handshake_age_s: 312, keepalive_s: 0, tx_bytes_delta: 0, rx_bytes_delta: 0, initiations_sent: 3, responses_received: 0, path_mtu: -1, blackhole: false },
  ];
  const vxTunnel = {
    present: true, kind: 'vxlan', family: 'ipv4', overhead_expected: 50, overhead_measured: 50,
    underlay_iface: 'eth0', underlay_mtu: 1500, path_mtu: -1, effective_underlay_mtu: 1500, max_mtu: 1450,
    port: 4789, endpoints: ['192.0.2.7:4789'], daemon: '', underlay_fragments: 0, underlay_bond_policy: '', underlay_bond_mode: '',
  };
  const tsTunnel = {
    ...wgTunnel, family: 'ipv4', overhead_measured: 60, max_mtu: 1440, usual_mtu: 1280, port: 41641,
    endpoints: ['198.51.100.20:41641'], daemon: 'tailscaled', underlay_fragments: 0,
  };
  const tsPeer = (over) => ({
    family: 'ipv4', allowed_ips: ['100.64.0.2/32'], handshake_age_s: 12, keepalive_s: 0, initiations_sent: 0,
    responses_received: 0, path_mtu: -1, blackhole: false, derp_region: 'fra', derp_servers: ['192.0.2.30:443'],
    online: true, ...over,
  });
  const tsPeers = [
    tsPeer({ name: WG_KEY2, host: 'db-1', endpoint: '', path: 'derp', tx_bytes_delta: 6100000, rx_bytes_delta: 180000, derp_bytes: 6500000, udp_bytes: 0 }),
    tsPeer({ name: WG_KEY, host: 'web-2', endpoint: '198.51.100.20:41641', path: 'direct', tx_bytes_delta: 2200000, rx_bytes_delta: 90000, derp_bytes: 300, udp_bytes: 2400000 }),
  ];
  const base = { hooks: { ingress: 'tc', egress: 'tc', method: 'link' }, counters: counters(), updated_ms: now - 3000 };
  const wobble = 1 + 0.2 * Math.sin(now / 20000);
  return [
    { ...base, name: 'wg0', index: 7, kind: 'wireguard', mtu: 1480, up: true, watched: true,
      rates: { rx_bps: 3.1e6 * wobble, tx_bps: 88.4e6 * wobble, rx_pps: 410, tx_pps: 7400 },
      facts: facts('wg0', 'wireguard', 1480, wgTunnel, wgPeers, 0.031), worst_severity: 'critical' },
    { ...base, name: 'tailscale0', index: 12, kind: 'wireguard', mtu: 1280, up: true, watched: true,
      rates: { rx_bps: 0.3e6 * wobble, tx_bps: 8.3e6 * wobble, rx_pps: 60, tx_pps: 800 },
      facts: facts('tailscale0', 'wireguard', 1280, tsTunnel, tsPeers, 0.14), worst_severity: 'warning' },
    { ...base, name: 'eth0', index: 2, kind: 'physical', mtu: 1500, up: true, watched: true,
      rates: { rx_bps: 92.2e6 * wobble, tx_bps: 4.2e6, rx_pps: 7800, tx_pps: 600 },
      facts: facts('eth0', 'physical', 1500, null, [], 0.0004), worst_severity: null },
    { ...base, name: 'vxlan100', index: 9, kind: 'vxlan', mtu: 1450, up: true, watched: true,
      rates: { rx_bps: 0, tx_bps: 0, rx_pps: 0, tx_pps: 0 },
      facts: facts('vxlan100', 'vxlan', 1450, vxTunnel, [{ name: '192.0.2.7:4789', endpoint: '192.0.2.7:4789', family: 'ipv4', allowed_ips: [], handshake_age_s: -1, keepalive_s: 0, tx_bytes_delta: 0, rx_bytes_delta: 0, initiations_sent: 0, responses_received: 0, path_mtu: -1, blackhole: false }], 0), worst_severity: 'info' },
    { ...base, name: 'tun-new', index: 11, kind: 'tun', mtu: 1400, up: true, watched: true,
      rates: { rx_bps: 0, tx_bps: 0, rx_pps: 0, tx_pps: 0 }, facts: null, worst_severity: null },
    { ...base, name: 'lo', index: 1, kind: 'loopback', mtu: 65536, up: true, watched: false, hooks: null,
      rates: { rx_bps: 0, tx_bps: 0, rx_pps: 0, tx_pps: 0 }, facts: null, worst_severity: null },
  ];
}

function socket(i, iface, cc, local, remote, retrans, thr) {
  const segs = 7000 + i * 113;
  return {
    cookie: 4096 + i, local, remote, state: 'established', ifindex: iface === 'wg0' ? 7 : 2, cc, ca_state: retrans ? 'recovery' : 'open',
    srtt_us: 21000 + i * 900, rttvar_us: 3000, min_rtt_us: 18000, cwnd: 10 + i * 7, ssthresh: 2147483647,
    total_retrans: Math.round(segs * retrans * 3), lost: 0, retrans_out: 0, segs_out: segs, data_segs_out: segs,
    mss: iface === 'wg0' ? 1428 : 1448, pmtu: iface === 'wg0' ? 1480 : 1500, reordering: 3, delivery_rate_bps: thr,
    bytes_acked: 13770000 + i * 1e6, bytes_received: 4096 + i, bytes_sent: 13900000, bytes_retrans: 140000, mtu_probing: false,
    closed: false, duration_ms: null, data_segs_sent: segs, retransmits: Math.round(segs * retrans), retransmits_per_s: segs * retrans / 10,
    retrans_ratio: retrans, full_size_retransmits: Math.round(segs * retrans), small_retransmits: 0, throughput_bps: thr, interface: iface,
    limit: retrans > 0.01 ? 'congestion' : 'application', limit_share: retrans > 0.01 ? 0.93 : 0.8, busy_share: retrans > 0.01 ? 0.93 : 0.2,
    rwnd_limited_share: 0, sndbuf_limited_share: 0, idle_share: retrans > 0.01 ? 0.07 : 0.8, observed_ms: 10000, busy_ms: 9300, rwnd_limited_ms: 0,
    sndbuf_limited_ms: 0, under_loss: retrans > 0, sending_rate_bps: thr, window_bytes: -1, ceiling_bps: -1, path_rate_bps: thr,
    needed_window_bytes: -1, receiver_local: false,
  };
}

export function sockets() {
  return [
    socket(1, 'wg0', 'cubic', '10.250.0.1:41234', '10.250.0.2:5201', 0.034, 41.2e6),
    socket(2, 'wg0', 'cubic', '10.250.0.1:41236', '10.250.0.2:5201', 0.028, 37.9e6),
    { ...socket(3, 'wg0', 'bbr', '10.250.0.1:41240', '10.250.0.2:5202', 0.012, 88.1e6), limit: 'receiver_window', limit_share: 0.91,
      rwnd_limited_share: 0.91, busy_share: 0.09, idle_share: 0, window_bytes: 262144, ceiling_bps: 91.2e6, path_rate_bps: 167.2e6,
      needed_window_bytes: 480000 },
    socket(4, 'eth0', 'cubic', '192.0.2.1:22', '192.0.2.50:53111', 0, 0.2e6),
    { ...socket(5, 'eth0', 'bbr', '[2001:db8::1]:443', '[2001:db8::99]:60000', 0.001, 12e6), closed: true, closed_from: 'last-ack', state: 'close', duration_ms: 4200 },
  ];
}

export function flows(now) {
  const f = (i, iface, dir, proto, src, sp, dst, dp, bytes, encap, retrans) => ({
    ifindex: iface === 'wg0' ? 7 : 2, direction: dir, protocol: proto, src, src_port: sp, dst, dst_port: dp,
    packets: Math.round(bytes / 1400), segments: Math.round(bytes / 1300), bytes, first_seen_ms: now - 60000, last_seen_ms: now - i * 1500,
    tcp_flags: proto === 6 ? 27 : 0, syn_mss: proto === 6 ? 1440 : 0, max_segment: iface === 'wg0' ? 1480 : 1500, retransmits: retrans, encap,
    wireguard: { initiation: 0, response: 0, cookie: 0, data: encap === 'wireguard' ? Math.round(bytes / 1400) : 0 }, interface: iface,
  });
  return [
    f(1, 'wg0', 'egress', 6, '10.250.0.1', 41234, '10.250.0.2', 5201, 13770000, 'none', 312),
    f(2, 'wg0', 'ingress', 6, '10.250.0.2', 5201, '10.250.0.1', 41234, 420000, 'none', 0),
    f(3, 'eth0', 'egress', 17, '192.0.2.1', 51820, '192.0.2.2', 51820, 14500000, 'wireguard', 0),
    f(4, 'eth0', 'ingress', 1, '192.0.2.254', 0, '192.0.2.1', 0, 840, 'none', 0),
    f(5, 'eth0', 'egress', 58, '2001:db8::1', 0, '2001:db8::99', 0, 1040, 'none', 0),
  ];
}

export function findings(now) {
  return [
    { id: 'mtu.tunnel_exceeds_underlay', interface: 'wg0', subject: null, severity: 'critical',
      summary: 'wg0 has MTU 1480, but wireguard over ipv4 adds 60 bytes and the underlay eth0 carries at most 1500: full-size packets do not fit',
      evidence: { largest_fitting_mtu: 1440, overhead_expected: 60, tunnel_mtu: 1480, underlay_path_mtu: 1500, underlay_route_mtu: 1500 },
      fix: 'ip link set dev wg0 mtu 1440   # and MTU = 1440 in the tunnel\'s configuration so it survives a restart',
      reference: null, state: 'active', opened_ms: now - 3600e3 * 2.5, last_seen_ms: now - 4000, resolved_ms: null, evaluations: 901,
      cause: "began 40 s after wg0's MTU changed 1420 → 1480" },
    { id: 'tcp.cubic_on_lossy_path', interface: 'wg0', subject: '10.250.0.1:41234 -> 10.250.0.2:5201', severity: 'warning',
      summary: 'cubic connection 10.250.0.1:41234 -> 10.250.0.2:5201 retransmits 3.40 % of its segments while bbr is available',
      evidence: { cc: 'cubic', retrans_ratio: 0.034, bbr_available: true },
      fix: 'sysctl -w net.ipv4.tcp_congestion_control=bbr', reference: 'https://example.invalid/bbr',
      state: 'active', opened_ms: now - 600e3, last_seen_ms: now - 4000, resolved_ms: null, evaluations: 60 },
    { id: 'wireguard.handshake_stale', interface: 'wg0', subject: WG_KEY2, severity: 'critical',
      summary: 'peer Qm9iIGlz… has had no handshake for 312 s while traffic waits', evidence: { handshake_age_s: 312, initiations_sent: 3, responses_received: 0 },
      fix: 'wg show wg0 endpoints   # check the peer is reachable on 198.51.100.9:51820 (UDP)', reference: null,
      state: 'resolved', opened_ms: now - 7200e3, last_seen_ms: now - 5400e3, resolved_ms: now - 5390e3, evaluations: 180 },
  ];
}

export function events(now) {
  const ev = (ago, kind, iface, subject, change, old, neu, text) => ({ ts_ms: now - ago, kind, interface: iface, subject, change, old, new: neu, text });
  return [
    ev(300e3, 'sysctl', '', 'net.ipv4.tcp_congestion_control', 'changed', 'bbr', 'cubic', 'net.ipv4.tcp_congestion_control changed bbr → cubic'),
    ev(1500e3, 'route', 'wg0', '10.9.0.0/24 table main', 'added', null, 'dev wg0', 'route 10.9.0.0/24 table main added: dev wg0'),
    ev(3600e3 * 2.5 + 40e3, 'link.mtu', 'wg0', '', 'changed', '1420', '1480', "wg0's MTU changed 1420 → 1480"),
  ];
}

const BUCKETS = ['<=576', '<=1280', '<=1380', '<=1420', '<=1440', '<=1450', '<=1480', '<=1500', '<=9000', '>9000'];

export function samples(iface, now, since) {
  const list = interfaces(now);
  const i = list.find((x) => x.name === iface);
  if (!i || !i.watched || !i.facts) return [];
  const out = [];
  const n = 90;
  for (let k = n - 1; k >= 0; k--) {
    const ts = Math.floor((now - k * 10000) / 10000) * 10000;
    if (since && ts < since) continue;
    const w = 1 + 0.5 * Math.sin(ts / 60000);
    const lossy = iface === 'wg0';
    out.push({
      ts_ms: ts, interface: iface, window_s: 10.0,
      rx_bps: i.rates.rx_bps * w, tx_bps: i.rates.tx_bps * w, rx_pps: i.rates.rx_pps * w, tx_pps: i.rates.tx_pps * w,
      mtu: k > 60 && iface === 'wg0' ? 1420 : i.mtu,
      size_buckets: Object.fromEntries(BUCKETS.map((b, j) => [b, j === 6 ? Math.round(4000 * w) : j === 3 ? 900 : j === 0 ? 1500 : j === 7 ? 10 : 0])),
      retrans_by_cc: lossy
        ? { cubic: { segments: 7000, retransmits: Math.round(7000 * 0.03 * w), ratio: 0.03 * w }, bbr: { segments: 9000, retransmits: Math.round(9000 * 0.01 * w), ratio: 0.01 * w } }
        : { cubic: { segments: 100, retransmits: 0, ratio: 0 } },
      tcp_retrans_ratio: lossy ? 0.025 * w : 0.0004,
      drops_by_reason: k % 7 === 0 ? { NETFILTER_DROP: 3 } : k % 11 === 0 ? { IP_RPFILTER: 2, PKT_TOO_BIG: 1 } : {},
      overhead_expected: i.facts.tunnel.overhead_expected, overhead_measured: i.facts.tunnel.overhead_measured,
      path_mtu: k % 30 === 0 && i.facts.tunnel.present ? 1500 - (k === 30 ? 100 : 0) : -1,
      probe_blackhole: k === 30,
      active_findings: lossy ? 2 : 0,
    });
  }
  return out;
}

export function diagnoseReport(iface, now) {
  const i = interfaces(now).find((x) => x.name === iface);
  const f = findings(now).filter((x) => x.interface === iface && x.state === 'active')
    .map(({ id, severity, summary, evidence, fix, reference, subject }) => {
      const out = { id, severity, summary, evidence, fix };
      if (reference) out.reference = reference;
      if (subject) out.subject = subject;
      return out;
    });
  return {
    interface: iface, kind: i.kind, duration_s: 5.0,
    facts: i.facts || facts(iface, i.kind, i.mtu, null, [], 0),
    findings: f,
    notes: iface === 'wg0' ? ['no unfragmented full-size traffic was seen, so the overhead could not be measured'] : [],
  };
}
