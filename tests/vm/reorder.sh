# The kernel lane's reordering cases (sourced by cases.sh with the suite `reorder`; netem and
# bonding exist only in the guests): one cubic iperf3 upload (paced at 6 Mbit/s so that TCG
# keeps up) from A to B, A's interface diagnosed for 8 s in its middle.
# - reorder_netem: A's veth reorders a quarter of its packets (netem reorder behind a 5 ms
#   delay), nothing lost: tcp.reordering (DSACKs, reordering events), not
#   tcp.high_retransmits or tcp.cubic_on_lossy_path.
# - reorder_loss: the same path losing 5 % instead: tcp.high_retransmits, not tcp.reordering.
# - reorder_rr: a balance-rr bond over two veths, one member 5 ms slower: tcp.reordering
#   naming the bond's balance-rr.
# - reorder_rr_even: the same bond with both members equal: no tcp.reordering.
# kernel_matrix.rs (lane_checks/reorder.rs) asserts. Uses cases.sh's $ND, $OUT, $T,
# ns_pair, start_case and finish_case.

RA=ndra$T
RB=ndrb$T
ns_pair $RA $RB ndrva$T ndrvb$T 10.71.0 || return
in_ra() { nsenter --net=/run/netns/$RA "$@"; }
in_rb() { nsenter --net=/run/netns/$RB "$@"; }
for m in 0 1; do
    ip link add ndrm$m$T netns $RA type veth peer name ndrm$m$T netns $RB
done
in_rb iperf3 -s -D -p 5431

# reorder_flow CASE IFACE ADDRESS: diagnoses A's IFACE for 8 s while iperf3 uploads to
# ADDRESS. The upload starts before netdoctor and ends after its window, so the window is full
# of it however long netdoctor takes to load and start_case to notice it observing (under TCG
# on a busy machine, seconds: an upload started on notice can fall partly outside the window).
reorder_flow() {
    nsenter --net=/run/netns/$RA iperf3 -c $3 -p 5431 -t 300 -b 6M -C cubic \
        >"$OUT/$1.iperf3" 2>&1 &
    UPLOAD=$!
    nap 1
    start_case $1 $RA diagnose $2 --json --duration 8s --no-probe
    finish_case $1
    kill $UPLOAD 2>/dev/null
    wait $UPLOAD 2>/dev/null
    nap 1
}
in_ra tc qdisc replace dev ndrva$T root netem delay 5ms reorder 25% 50%
reorder_flow reorder_netem ndrva$T 10.71.0.2
in_ra tc qdisc replace dev ndrva$T root netem delay 5ms loss 5%
reorder_flow reorder_loss ndrva$T 10.71.0.2

# The bond: balance-rr at both ends, A's first member 5 ms slower than its second.
if in_ra ip link add ndrbond$T type bond mode balance-rr miimon 100 2>"$OUT/reorder_rr.unsupported"; then
    rm "$OUT/reorder_rr.unsupported"
    in_rb ip link add ndrbond$T type bond mode balance-rr miimon 100
    for ns in $RA $RB; do
        for m in 0 1; do
            nsenter --net=/run/netns/$ns ip link set ndrm$m$T master ndrbond$T
            nsenter --net=/run/netns/$ns ip link set ndrm$m$T up
        done
        nsenter --net=/run/netns/$ns ip link set ndrbond$T up
    done
    in_ra ip addr add 10.72.0.1/24 dev ndrbond$T
    in_rb ip addr add 10.72.0.2/24 dev ndrbond$T
    in_ra ping -c 2 -W 5 10.72.0.2 >/dev/null
    in_ra tc qdisc replace dev ndrm0$T root netem delay 5ms
    reorder_flow reorder_rr ndrbond$T 10.72.0.2
    in_ra tc qdisc del dev ndrm0$T root
    reorder_flow reorder_rr_even ndrbond$T 10.72.0.2
fi

ip netns pids $RA | xargs -r kill 2>/dev/null
ip netns pids $RB | xargs -r kill 2>/dev/null
ip netns del $RA
ip netns del $RB
