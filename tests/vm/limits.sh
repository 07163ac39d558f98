# The kernel lane's connection-limit cases (sourced by cases.sh with the suite `limits`, on
# every kernel: netem exists only in the guests): a 40 ms path (netem delay 20 ms each way,
# 16 Mbit/s, which the guests move under TCG) between two namespaces.
# - limits_window: the receiver's tcp_rmem caps its buffer at 32 KiB, a window of about 16 KiB
#   (3.3 Mbit/s at 40 ms, far below the path's 80 KB BDP); four parallel streams carry about
#   four times that: each is receiver_window, and tcp.receive_window_limited names the ceiling
#   in Mbit/s and the tcp_rmem maximum that lifts it.
# - limits_paced: the same receiver, four senders paced by the application (iperf3 -b 400K,
#   8 KiB writes): application, no window finding.
# - limits_lossy: default buffers, 3 % loss on the way out: one cubic stream is congestion,
#   under loss, and no window finding.
# kernel_matrix.rs (lane_checks/limits.rs) asserts. Uses cases.sh's $ND, $OUT, $T,
# ns_pair, start_case and finish_case.

LA=ndla$T
LB=ndlb$T
ns_pair $LA $LB ndlva$T ndlvb$T 10.42.0 || return
# lpath LOSS_PCT: 20 ms and 16 Mbit/s each way, the loss on the way out of A.
lpath() {
    nsenter --net=/run/netns/$LA tc qdisc replace dev ndlva$T root netem \
        delay 20ms loss "$1"% rate 16mbit limit 2000
    nsenter --net=/run/netns/$LB tc qdisc replace dev ndlvb$T root netem \
        delay 20ms rate 16mbit limit 2000
}
lpath 0
nsenter --net=/run/netns/$LB sysctl -qw net.ipv4.tcp_rmem="4096 16384 32768"
nsenter --net=/run/netns/$LB iperf3 -s -D -p 5411
nsenter --net=/run/netns/$LA ping -c 2 -W 5 10.42.0.2 >/dev/null

# limits_flow CASE IPERF3_ARGS...: diagnoses A's veth for 14 s while iperf3 uploads to B
# for 8 s from when netdoctor observes (its JSON report in CASE.iperf3): the window is longer
# than the upload so that it holds most of it however slowly a busy guest under TCG starts
# iperf3's streams (with an 8 s window, a 5.10 guest overlapped about a second of them).
limits_flow() {
    c=$1
    shift
    start_case $c $LA diagnose ndlva$T --json --duration 14s --no-probe
    # Bounded, so that a stuck transfer fails its case rather than the whole guest.
    timeout 120 nsenter --net=/run/netns/$LA iperf3 -c 10.42.0.2 -p 5411 -t 8 -J "$@" \
        >"$OUT/$c.iperf3" 2>&1
    finish_case $c
}

limits_flow limits_window -P 4
limits_flow limits_paced -P 4 -b 400K -l 8K
nsenter --net=/run/netns/$LB sysctl -qw net.ipv4.tcp_rmem="4096 131072 6291456"
lpath 3
limits_flow limits_lossy -C cubic

ip netns pids $LA | xargs -r kill 2>/dev/null
ip netns pids $LB | xargs -r kill 2>/dev/null
ip netns del $LA
ip netns del $LB
