# The kernel lane's connection-limit cases (sourced by cases.sh with the suite `limits`, on
# every kernel: netem exists only in the guests): a 40 ms path (netem delay 20 ms each way,
# 16 Mbit/s, which the guests move under TCG) between two namespaces.
# - limits_window: the receiver's tcp_rmem caps its buffer at 32 KiB, a window of about 16 KiB
#   (3.3 Mbit/s at 40 ms, far below the path's 80 KB BDP); four parallel streams carry about
#   four times that: each is receiver_window, and tcp.receive_window_limited names the ceiling
#   in Mbit/s and the tcp_rmem maximum that lifts it.
# - limits_paced: the same receiver, four senders paced by the application (iperf3 -b 400K,
#   8 KiB writes): application, no window finding.
# - limits_sndbuf: the receiver's default buffers, the sender's tcp_wmem capped at 32 KiB, the
#   40 ms all on the way back and no rate limit: four streams are each send_buffer, and
#   tcp.send_buffer_limited names this host's tcp_wmem.
# - limits_lossy: default buffers, 3 % loss on the way out: one cubic stream is congestion,
#   under loss, and no window finding.
# kernel_matrix.rs (lane_checks/limits.rs) asserts. Uses cases.sh's $ND, $OUT, $T and
# wait_for.

LA=ndla$T
LB=ndlb$T
ip netns add $LA && ip netns add $LB || return
ip link add ndlva$T netns $LA type veth peer name ndlvb$T netns $LB
for ns in $LA $LB; do
    nsenter --net=/run/netns/$ns ip link set lo up
done
nsenter --net=/run/netns/$LA ip addr add 10.42.0.1/24 dev ndlva$T
nsenter --net=/run/netns/$LB ip addr add 10.42.0.2/24 dev ndlvb$T
nsenter --net=/run/netns/$LA ip link set ndlva$T up
nsenter --net=/run/netns/$LB ip link set ndlvb$T up
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

# limits_flow CASE IPERF3_ARGS...: diagnoses A's veth for 8 s while iperf3 uploads to B
# from when netdoctor observes (8 s, its JSON report in CASE.iperf3).
limits_flow() {
    c=$1
    shift
    nsenter --net=/run/netns/$LA "$ND" -v diagnose ndlva$T --json --duration 8s --no-probe \
        >"$OUT/$c.out" 2>"$OUT/$c.err" &
    BG=$!
    wait_for "$OUT/$c.err" "netdoctor: observing" "$BG" || true
    # Bounded, so that a stuck transfer fails its case rather than the whole guest.
    timeout 120 nsenter --net=/run/netns/$LA iperf3 -c 10.42.0.2 -p 5411 -t 8 -J "$@" \
        >"$OUT/$c.iperf3" 2>&1
    wait $BG
    echo $? >"$OUT/$c.rc"
}

limits_flow limits_window -P 4
limits_flow limits_paced -P 4 -b 400K -l 8K
nsenter --net=/run/netns/$LB sysctl -qw net.ipv4.tcp_rmem="4096 131072 6291456"
# The send buffer's case delays only B's packets (40 ms, no rate): a queue on the sender's
# own interface would hold its data in the qdisc, and the kernel then counts the sender busy,
# not waiting for buffer space.
nsenter --net=/run/netns/$LA tc qdisc del dev ndlva$T root
nsenter --net=/run/netns/$LB tc qdisc replace dev ndlvb$T root netem delay 40ms limit 2000
nsenter --net=/run/netns/$LA sysctl -qw net.ipv4.tcp_wmem="4096 16384 32768"
limits_flow limits_sndbuf -P 4
nsenter --net=/run/netns/$LA sysctl -qw net.ipv4.tcp_wmem="4096 16384 4194304"
lpath 3
limits_flow limits_lossy -C cubic

ip netns pids $LA | xargs -r kill 2>/dev/null
ip netns pids $LB | xargs -r kill 2>/dev/null
ip netns del $LA
ip netns del $LB
