# The kernel lane's WireGuard path cases (sourced by cases.sh with the suite `wg_path`; netem
# and kernel WireGuard exist only in the guests): kernel WireGuard between two namespaces over
# a veth, netem on the underlay, steady traffic inside the tunnel (1200-byte echo requests
# every 2 ms, so no TCP retransmission hides or adds anything).
# - wgpath_loss: 5 % of A's underlay packets lost: B's diagnose reads the peer's underlay loss
#   within 1.5 points of it and reports wireguard.underlay_loss.
# - wgpath_reorder: A's underlay reorders a quarter of its packets (netem reorder behind a
#   10 ms delay), nothing lost: under 0.5 % and no finding.
# - wgpath_rtt, wgpath_rtt2, wgpath_rtt3: 25 ms each way, A renews its session in the window:
#   A's diagnose reads the handshake's round trip, the fastest of three 50 ± 5 ms above its
#   twin's without delay (wgpath_rtt0: what the peer's handshake work costs under TCG).
# kernel_matrix.rs (lane_checks/wg_path.rs) asserts. Uses cases.sh's $ND, $OUT, $WORK, $T,
# ns_pair, start_case and finish_case.

GA=ndga$T
GB=ndgb$T
ns_pair $GA $GB ndgva$T ndgvb$T 10.61.0 || return
in_ga() { nsenter --net=/run/netns/$GA "$@"; }
in_gb() { nsenter --net=/run/netns/$GB "$@"; }
if in_ga ip link add ndgwa$T type wireguard 2>"$OUT/wg_path.unsupported"; then
    rm "$OUT/wg_path.unsupported"
    in_gb ip link add ndgwb$T type wireguard
    umask 077
    wg genkey >"$WORK/ga.key"
    wg genkey >"$WORK/gb.key"
    GKA=$(wg pubkey <"$WORK/ga.key")
    GKB=$(wg pubkey <"$WORK/gb.key")
    in_ga wg set ndgwa$T private-key "$WORK/ga.key" listen-port 51821 \
        peer "$GKB" allowed-ips 10.62.0.2/32 endpoint 10.61.0.2:51821
    in_gb wg set ndgwb$T private-key "$WORK/gb.key" listen-port 51821 \
        peer "$GKA" allowed-ips 10.62.0.1/32 endpoint 10.61.0.1:51821
    in_ga ip addr add 10.62.0.1/24 dev ndgwa$T
    in_gb ip addr add 10.62.0.2/24 dev ndgwb$T
    in_ga ip link set ndgwa$T mtu 1420 up
    in_gb ip link set ndgwb$T mtu 1420 up
    in_ga ping -c 3 -i 0.2 -W 5 10.62.0.2 >/dev/null

    # wgpath_flow CASE NETEM...: A's underlay through netem NETEM; B's tunnel diagnosed for
    # 14 s while A sends steady traffic through it for 8 s from when netdoctor observes (the
    # window longer than the traffic, however slowly a busy guest starts it): 1200-byte echo
    # requests every 2 ms (~4.8 Mbit/s). Not iperf3 -u, whose start (a TCP control connection,
    # then a first datagram answered) a lossy underlay can lose, stalling it past the window.
    wgpath_flow() {
        c=$1
        shift
        in_ga tc qdisc replace dev ndgva$T root netem "$@"
        start_case $c $GB diagnose ndgwb$T --json --duration 14s --no-probe
        timeout 60 nsenter --net=/run/netns/$GA ping -q -i 0.002 -s 1172 -w 8 10.62.0.2 \
            >"$OUT/$c.ping" 2>&1
        finish_case $c
    }
    wgpath_flow wgpath_loss loss 5%
    wgpath_flow wgpath_reorder delay 10ms reorder 25% 50%

    # wgpath_renew CASE: both ends forget their peer and add it again before A's window (done
    # in the window, the removal raced netdoctor's reading of the peers), so A's next packet,
    # a ping in the window, starts a handshake whose response falls in it; A's diagnose times
    # it. B forgets too: with its old session B would send a keepalive A cannot read and,
    # hearing nothing back for 15 s, start a handshake of its own, before A's window when
    # netdoctor takes that long to start (a loaded TCG guest did).
    wgpath_renew() {
        in_gb wg set ndgwb$T peer "$GKA" remove
        in_gb wg set ndgwb$T peer "$GKA" allowed-ips 10.62.0.1/32 endpoint 10.61.0.1:51821
        in_ga wg set ndgwa$T peer "$GKB" remove
        in_ga wg set ndgwa$T peer "$GKB" allowed-ips 10.62.0.2/32 endpoint 10.61.0.2:51821
        start_case $1 $GA diagnose ndgwa$T --json --duration 8s --no-probe
        in_ga ping -c 4 -i 0.5 -W 5 10.62.0.2 >"$OUT/$1.ping" 2>&1
        finish_case $1
    }
    # The round trip includes B's work on the handshake, which TCG makes milliseconds: the
    # twin without delay measures it, and 25 ms each way must add 50 ms to it. That work
    # swings by tens of ms on a loaded host (it only ever adds): three delayed handshakes,
    # the fastest counts (of two, both once took 6-15 ms longer than the twin's on 5.10).
    in_ga tc qdisc del dev ndgva$T root
    wgpath_renew wgpath_rtt0
    in_ga tc qdisc replace dev ndgva$T root netem delay 25ms
    in_gb tc qdisc replace dev ndgvb$T root netem delay 25ms
    wgpath_renew wgpath_rtt
    wgpath_renew wgpath_rtt2
    wgpath_renew wgpath_rtt3
fi

ip netns pids $GA | xargs -r kill 2>/dev/null
ip netns pids $GB | xargs -r kill 2>/dev/null
ip netns del $GA
ip netns del $GB
