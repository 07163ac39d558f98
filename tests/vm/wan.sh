# The kernel lane's WAN cases (sourced by cases.sh with the suite `wan`): paths with netem
# delay, loss and a rate limit, which only the guests' kernels have. Cubic on a lossy path and
# bbr on the same path, the loss-based estimate against iperf3 at three (RTT, loss) points,
# high retransmissions and their twin, a PMTU blackhole behind a long hop and its twin, and a
# kernel WireGuard MTU error over a lossy 60 ms path and its twin. The two more estimate
# points need the part `mathis`, the faults `wan_faults` (one kernel runs them).
# kernel_matrix.rs asserts.
#
# Uses cases.sh's $ND, $OUT, $T, $WORK, ns_pair and tunnels.sh's diag and wg_pair.
# Rates stay at or below 16 Mbit/s, which the guests move under TCG, so that loss and the
# round trip limit TCP, not the emulator.

modprobe tcp_bbr 2>/dev/null
WA=ndwna$T
WB=ndwnb$T
ns_pair $WA $WB ndwva$T ndwvb$T 10.40.0 || return
nsenter --net=/run/netns/$WB iperf3 -s -D -p 5401
nsenter --net=/run/netns/$WB iperf3 -s -D -p 5402

# path RTT_MS LOSS_PCT: half the round trip each way, the loss and 16 Mbit/s on the way out
# of A (where the data goes), 16 Mbit/s back.
path() {
    nsenter --net=/run/netns/$WA tc qdisc replace dev ndwva$T root netem \
        delay $(($1 / 2))ms loss "$2"% rate 16mbit limit 2000
    nsenter --net=/run/netns/$WB tc qdisc replace dev ndwvb$T root netem \
        delay $(($1 / 2))ms rate 16mbit limit 2000
    echo "$1 $2" >>"$OUT/wan.paths"
}

# flow CASE CC [SECONDS [WINDOW]]: diagnoses A's veth for WINDOW (8s) while one CC
# connection uploads to B; the connection starts when netdoctor observes and runs SECONDS
# (8) with iperf3's report kept in CASE.iperf3 (JSON).
flow() {
    c=$1 cc=$2 secs=${3:-8} window=${4:-8s}
    nsenter --net=/run/netns/$WA "$ND" -v diagnose ndwva$T --json --duration $window --no-probe \
        >"$OUT/$c.out" 2>"$OUT/$c.err" &
    BG=$!
    wait_for "$OUT/$c.err" "netdoctor: observing" "$BG" || true
    nsenter --net=/run/netns/$WA iperf3 -c 10.40.0.2 -p 5401 -t "$secs" -C "$cc" -J \
        >"$OUT/$c.iperf3" 2>&1
    wait $BG
    echo $? >"$OUT/$c.rc"
}

# iperf CASE CC: the same connection alone, without netdoctor: iperf3's figure.
iperf() {
    nsenter --net=/run/netns/$WA iperf3 -c 10.40.0.2 -p 5402 -t 6 -C "$2" -J >"$OUT/$1.iperf3" 2>&1
}

# cubic on a 60 ms path losing 5 %, and bbr on the same path.
path 60 5
flow wan_cubic_60_5 cubic
flow wan_bbr_60_5 bbr
if wants mathis; then
    # The loss-based estimate against iperf3 at two more points (cubic with netdoctor
    # watching, bbr alone).
    path 20 2
    flow wan_cubic_20_2 cubic
    iperf wan_bbr_20_2 bbr
    # At 200 ms a short connection is still in slow start and moves few segments (at 2 %
    # loss a 10 s window once read 0.99 %, under the rule's 1 %): 16 s, the window 14.
    path 200 2
    flow wan_cubic_200_2 cubic 16 14s
    iperf wan_bbr_200_2 bbr
fi
if ! wants wan_faults; then
    ip netns pids $WA | xargs -r kill 2>/dev/null
    ip netns pids $WB | xargs -r kill 2>/dev/null
    ip netns del $WA
    ip netns del $WB
    return
fi
# High retransmissions (bbr, so no cubic finding): 10 % at 20 ms; the twin loses 0.5 %.
path 20 10
flow wan_retrans_20_10 bbr
path 20 0.5
flow wan_retrans_20_05 bbr

# A kernel WireGuard tunnel over a 60 ms path losing 1 %: MTU 1500 (too big), then 1440.
path 60 1
wg_pair $WA $WB ndwwa$T ndwwb$T 10.40.0.1 10.40.0.2 10.41.0 1500
diag wan_wg1500 $WA ndwwa$T --duration 2s --no-probe
nsenter --net=/run/netns/$WA ip link set ndwwa$T mtu 1440
nsenter --net=/run/netns/$WB ip link set ndwwb$T mtu 1440
nsenter --net=/run/netns/$WA ping -c 2 -i 0.2 -W 5 10.41.0.2 >/dev/null
diag wan_wg1440 $WA ndwwa$T --duration 2s --no-probe
ip netns pids $WA | xargs -r kill 2>/dev/null
ip netns pids $WB | xargs -r kill 2>/dev/null
ip netns del $WA
ip netns del $WB

# A PMTU blackhole: client - router - server, the router's hop to the server has MTU 1400
# and 40 ms of delay each way; the router drops the ICMP "fragmentation needed" it would send
# back (blackhole) or lets it through (twin). diagnose probes the path (no --no-probe) toward
# a connection that retransmits full-size segments.
blackhole() {
    c=$1 filter=$2
    PC=ndpc$T PR=ndpr$T PS=ndps$T
    for ns in $PC $PR $PS; do
        ip netns add $ns
        nsenter --net=/run/netns/$ns ip link set lo up
    done
    ip link add ndpc0$T netns $PC type veth peer name ndpr0$T netns $PR
    ip link add ndpr1$T netns $PR type veth peer name ndps0$T netns $PS
    in_ns() { n=$1; shift; nsenter --net=/run/netns/$n "$@"; }
    in_ns $PC ip addr add 10.50.0.1/24 dev ndpc0$T
    in_ns $PR ip addr add 10.50.0.2/24 dev ndpr0$T
    in_ns $PR ip addr add 10.51.0.1/24 dev ndpr1$T
    in_ns $PS ip addr add 10.51.0.2/24 dev ndps0$T
    in_ns $PC ip link set ndpc0$T up
    in_ns $PR ip link set ndpr0$T up
    in_ns $PR ip link set ndpr1$T mtu 1400 up
    in_ns $PS ip link set ndps0$T up
    in_ns $PC ip route add default via 10.50.0.2
    in_ns $PS ip route add default via 10.51.0.1
    in_ns $PR sysctl -qw net.ipv4.ip_forward=1
    in_ns $PR tc qdisc add dev ndpr1$T root netem delay 40ms
    in_ns $PR tc qdisc add dev ndpr0$T root netem delay 40ms
    if [ "$filter" = drop ]; then
        in_ns $PR nft add table inet ndbh
        in_ns $PR nft add chain inet ndbh out '{ type filter hook output priority 0; }'
        in_ns $PR nft add rule inet ndbh out icmp type destination-unreachable icmp code frag-needed drop
    fi
    in_ns $PS iperf3 -s -D -p 5501
    nap 0.5
    # The upload starts once netdoctor observes: started before, its full-size segments
    # would be retransmitted so rarely by the time netdoctor has loaded (the timeout doubles
    # each time) that the window might hold none.
    start_case $c $PC diagnose ndpc0$T --json --duration 8s
    nsenter --net=/run/netns/$PC iperf3 -c 10.51.0.2 -p 5501 -t 30 --connect-timeout 3000 \
        >/dev/null 2>&1 &
    LOAD=$!
    finish_case $c
    kill $LOAD 2>/dev/null
    wait $LOAD 2>/dev/null
    for ns in $PC $PR $PS; do
        ip netns pids $ns | xargs -r kill 2>/dev/null
        ip netns del $ns
    done
}
blackhole wan_blackhole drop
blackhole wan_pmtud pass
