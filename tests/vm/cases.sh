#!/bin/bash
# The kernel lane's cases, run once per kernel: inside a virtme-ng guest booted on that kernel
# (tests/tests/kernel_matrix.rs), or on the host. It only drives the built binary and records
# what happened; every assertion lives in kernel_matrix.rs, which reads the files this writes.
#
# Usage: cases.sh NETDOCTOR OUTDIR TAG [SUITES]
#   NETDOCTOR  the built binary; OUTDIR a writable directory for the results;
#   TAG        a short suffix that makes namespace and interface names unique on the host;
#   SUITES     more cases, from files beside this one: "tunnels" (bonds, GENEVE, IPIP:
#              tunnels.sh), "wan" (netem paths: wan.sh), "limits" (what limits a
#              connection: limits.sh), "wg_path" (WireGuard's underlay loss and handshake
#              round trip: wg_path.sh), "reorder" (reordering against loss, a balance-rr
#              bond: reorder.sh); words without a file add parts to
#              those: "lacp" and "ip_tunnels" (GRE, GRETAP, sit, ip6tnl) to tunnels, "mathis"
#              and "wan_faults" to wan. Each suite's start and end (the second and the
#              busy CPU seconds) go to SUITE.time, the base cases' to base.time.
# With ND_ONLY_SUITES set (development only, never in CI) it runs SUITES without the base
# cases.
# Per case CASE: CASE.out (stdout, JSON), CASE.err (stderr, -v), CASE.rc (exit code), and
# case-specific files. `kernel` holds `uname -r`, `done` marks a complete run.
set -u
ND=$1
OUT=$2
T=$3
SUITES=${4:-}
HERE=$(dirname "$0")
mkdir -p "$OUT"
exec >"$OUT/cases.log" 2>&1
# Each traced command with the second it started: the lane's time, case by case. Bash's
# $EPOCHSECONDS costs nothing, where `$(date +%s)` forked a process for every traced line:
# under TCG that was about 0.2 s of CPU per line, over a thousand lines per guest.
PS4='+ $EPOCHSECONDS '
set -x
uname -r >"$OUT/kernel"
# stamp: the second now and the CPU seconds the machine has been busy so far (every CPU,
# from /proc/stat's ticks of 1/100 s): the lane prints both for the base cases and each
# suite, since on a shared machine the wall time says little about what a case costs.
stamp() { echo "$EPOCHSECONDS $(awk '/^cpu /{print int(($2+$3+$4+$7+$8+$9)/100)}' /proc/stat)"; }
stamp >"$OUT/base.time"
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
WORK=$(mktemp -d)
A=nda$T
B=ndb$T
VA=ndva$T
VB=ndvb$T
WA=ndwa$T
WB=ndwb$T
in_a() { nsenter --net=/run/netns/$A "$@"; }
in_b() { nsenter --net=/run/netns/$B "$@"; }

cleanup() {
    [ -n "${AGENT:-}" ] && kill "$AGENT" 2>/dev/null
    ip netns pids $A 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns pids $B 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns del $A 2>/dev/null
    ip netns del $B 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# Under TCG every program the script starts costs the guest about 0.2 s of CPU (a 5.10
# guest ran 20 `cut`s in 4 s), so the loops that wait while netdoctor starts use builtins
# only: polling with grep, cut and sleep twice a second took more CPU than it left, and
# slowed netdoctor's start by 40 %.
# nap SECONDS: sleeps without a process (`read` times out on a pipe nobody writes to).
exec {NAP_FD}<> <(:)
nap() { read -r -t "$1" -u "$NAP_FD" _ || :; }

# Whether process $1 still runs (a zombie does not: the shell may not have reaped it yet).
running() {
    local stat
    IFS= read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    # The state follows the command name's closing parenthesis.
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

# contains FILE REGEX: whether FILE (read whole) matches the extended regular expression.
contains() {
    local text=
    IFS= read -r -d '' text 2>/dev/null <"$1"
    [[ $text =~ $2 ]]
}

# Waits (up to 120 s: BPF loads are slow under TCG) until file $1 matches the extended
# regular expression $2; with a pid $3, no longer than process $3 runs (a netdoctor that
# exited will not write it: without this, a binary that fails at once cost every case the
# whole 120 s).
wait_for() {
    local i=0
    while ! contains "$1" "$2"; do
        if [ -n "${3:-}" ] && ! running "$3"; then
            contains "$1" "$2"
            return
        fi
        i=$((i + 1))
        [ $i -gt 240 ] && return 1
        nap 0.5
    done
    return 0
}

# Runs `netdoctor ARGS` in namespace $2 as case $1 in the background; returns when it
# observes (its "watching"/"observing"/"counting" line), leaving its pid in $BG. Under TCG on
# a busy machine that can be ten seconds after the window opened: the cases that count
# traffic give a long duration and end the window with stop_case after their traffic.
start_case() {
    c=$1 ns=$2
    shift 2
    nsenter --net=/run/netns/$ns "$ND" -v "$@" >"$OUT/$c.out" 2>"$OUT/$c.err" &
    BG=$!
    wait_for "$OUT/$c.err" "netdoctor: (watching|observing|counting)" "$BG" || true
}
finish_case() {
    wait "$BG"
    echo $? >"$OUT/$1.rc"
}
# Ends case $1's window now (Ctrl-C: netdoctor still reports), so that the traffic it must
# see lies inside the window however late start_case noticed the window open.
stop_case() {
    kill -INT "$BG"
    finish_case "$1"
}

# IPv6 on the veth (fd09::1 <-> fd09::2), for the cases after the counting ones.
ipv6_on() {
    [ -n "${IPV6_ON:-}" ] && return
    IPV6_ON=1
    for ns in $A $B; do
        nsenter --net=/run/netns/$ns sysctl -qw net.ipv6.conf.all.disable_ipv6=0 \
            net.ipv6.conf.default.disable_ipv6=0
    done
    in_a sysctl -qw net.ipv6.conf.$VA.disable_ipv6=0
    in_b sysctl -qw net.ipv6.conf.$VB.disable_ipv6=0
    in_a ip addr add fd09::1/64 dev $VA nodad
    in_b ip addr add fd09::2/64 dev $VB nodad
    in_a ping -c 1 -W 5 fd09::2 >/dev/null
}

# ns_pair NSA NSB VETHA VETHB PREFIX: the suites' two namespaces (loopback up) joined by a
# veth VETHA (in NSA, PREFIX.1/24) - VETHB (in NSB, PREFIX.2/24), both up. Fails, creating
# nothing more, when a namespace cannot be added (a name left by an earlier run).
ns_pair() {
    ip netns add "$1" && ip netns add "$2" || return 1
    ip link add "$3" netns "$1" type veth peer name "$4" netns "$2"
    nsenter --net=/run/netns/"$1" ip link set lo up
    nsenter --net=/run/netns/"$2" ip link set lo up
    nsenter --net=/run/netns/"$1" ip addr add "$5.1/24" dev "$3"
    nsenter --net=/run/netns/"$2" ip addr add "$5.2/24" dev "$4"
    nsenter --net=/run/netns/"$1" ip link set "$3" up
    nsenter --net=/run/netns/"$2" ip link set "$4" up
}

# wants PART: whether SUITES lists PART.
wants() { case " $SUITES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# Runs the suites SUITES names (each a file beside this one), then marks the run complete.
run_suites() {
    for suite in $SUITES; do
        [ -f "$HERE/$suite.sh" ] || continue
        stamp >"$OUT/$suite.time"
        . "$HERE/$suite.sh"
        stamp >>"$OUT/$suite.time"
    done
    touch "$OUT/done"
}
if [ -n "${ND_ONLY_SUITES:-}" ]; then
    run_suites
    exit 0
fi

# Two namespaces joined by a veth, IPv6 off so that only the cases' packets cross it.
ip netns add $A && ip netns add $B || exit 1
ip link add $VA netns $A type veth peer name $VB netns $B
for ns in $A $B; do
    nsenter --net=/run/netns/$ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    nsenter --net=/run/netns/$ns ip link set lo up
done
in_a ip addr add 10.9.0.1/24 dev $VA
in_b ip addr add 10.9.0.2/24 dev $VB
in_a sysctl -qw net.ipv6.conf.$VA.disable_ipv6=1
in_b sysctl -qw net.ipv6.conf.$VB.disable_ipv6=1
in_a ip link set $VA up
in_b ip link set $VB up
# Static neighbours: no ARP either.
in_a ip neigh replace 10.9.0.2 lladdr "$(in_b cat /sys/class/net/$VB/address)" dev $VA nud permanent
in_b ip neigh replace 10.9.0.1 lladdr "$(in_a cat /sys/class/net/$VA/address)" dev $VB nud permanent
in_a ping -c 1 -W 5 10.9.0.2 >/dev/null

# dataplane: tc counters against the kernel's own interface counters over the same window.
start_case dataplane $A flows $VA --duration 300s --json
in_a ip -s -j link show dev $VA >"$OUT/dataplane.before"
in_a ping -c 20 -i 0.05 -s 1000 10.9.0.2 >/dev/null
in_a ip -s -j link show dev $VA >"$OUT/dataplane.after"
stop_case dataplane

# xdp: generic XDP on ingress counts the 20 echo replies.
start_case xdp $A flows $VA --ingress xdp --xdp-mode generic --duration 300s --json
in_a ping -c 20 -i 0.05 10.9.0.2 >/dev/null
stop_case xdp

# sockets: a cubic connection running across the window (it runs until killed: netdoctor
# may take a minute to load on a busy machine), over 5 % loss, must show its
# congestion control and its retransmissions; a short reno one inside the window is caught
# at close.
in_b iperf3 -s -D -p 5201 --logfile "$WORK/iperf3-long.log"
in_b iperf3 -s -D -p 5202 --logfile "$WORK/iperf3-short.log"
nap 1
# 5 % loss: netem on A's way out, or where the kernel has no netem (this CI's host) nft on
# B's way in.
if in_a tc qdisc add dev $VA root netem loss 5%; then
    unloss() { in_a tc qdisc del dev $VA root; }
else
    in_b nft add table inet ndloss
    in_b nft add chain inet ndloss in '{ type filter hook input priority 0; }'
    in_b nft add rule inet ndloss in iifname $VB tcp dport '{ 5201, 5202 }' numgen random mod 100 '<' 5 drop
    unloss() { in_b nft delete table inet ndloss; }
fi
# nsenter execs iperf3, so $! is iperf3 itself (a function would leave a subshell there).
nsenter --net=/run/netns/$A iperf3 -c 10.9.0.2 -p 5201 -t 300 -b 10M -C cubic >/dev/null 2>&1 &
LONG=$!
nap 2
start_case sockets $A flows $VA --duration 300s --json
nap 4
stop_case sockets
kill $LONG 2>/dev/null
wait $LONG 2>/dev/null
nap 1
start_case close $A flows $VA --duration 300s --json
in_a iperf3 -c 10.9.0.2 -p 5202 -t 1 -C reno >"$OUT/close.iperf3" 2>&1
# Over 5 % loss a FIN can need retransmitting: wait (up to 20 s) until A holds no
# connection to the port short of time-wait, so the window ends after the close.
for _ in $(seq 40); do
    [ -z "$(in_a ss -Htn state connected exclude time-wait '( dport = :5202 )')" ] && break
    nap 0.5
done
nap 1
stop_case close
unloss

# drops: B has forwarding off; what A routes through it is dropped (IP_INADDRERRORS).
in_b sysctl -qw net.ipv4.ip_forward=0
in_a ip route add 10.10.0.0/24 via 10.9.0.2
start_case drops $B drops --interface $VB --duration 300s --json
in_a ping -c 20 -i 0.05 -W 1 10.10.0.5 >/dev/null
stop_case drops

# signals: Ctrl-C (SIGINT) and SIGTERM during a diagnosis attached by netlink (what kernels
# before 6.6 use; the others too when asked): it detaches and removes the clsact qdisc it
# created; Ctrl-C ends the observation, which is reported, SIGTERM exits 143. `sigint_theirs`:
# a clsact that was there before, with someone else's u32 filter, stays with that filter.
# CASE.during and CASE.after: qdiscs, filters and the link (XDP).
tc_state() {
    {
        in_a tc qdisc show dev $VA
        in_a tc filter show dev $VA ingress
        in_a tc filter show dev $VA egress
        in_a ip -d link show dev $VA
    } >"$OUT/$1"
}
signal_case() {
    c=$1 sig=$2
    shift 2
    start_case $c $A diagnose $VA --duration 300s --no-probe --attach netlink --json "$@"
    tc_state $c.during
    nap 1
    kill -$sig "$BG"
    finish_case $c
    tc_state $c.after
}
signal_case sigint INT
signal_case sigterm TERM --ingress xdp --xdp-mode generic
in_a tc qdisc add dev $VA clsact
in_a tc filter add dev $VA ingress prio 1 protocol ip u32 match u32 0 0 classid 1:1
signal_case sigint_theirs INT
in_a tc qdisc del dev $VA clsact

# two_netlink: data planes by netlink on the interface at once. `flows` (two_netlink: generic
# XDP and a tc egress filter) runs while a diagnosis (two_netlink_diag) attaches tc filters of
# its own, each at its own handle, and removes only those when it ends; then a second `flows`
# asking for XDP too (two_netlink_xdp) finds it taken and counts with tc, saying so. The first
# still counts the 20 pings sent after both. CASE.during, .between (after the diagnosis), .after.
start_case two_netlink $A flows $VA --duration 300s --json --attach netlink --ingress xdp \
    --xdp-mode generic
FIRST=$BG
start_case two_netlink_diag $A diagnose $VA --duration 8s --no-probe --json --attach netlink
tc_state two_netlink.during
finish_case two_netlink_diag
tc_state two_netlink.between
in_a "$ND" -v flows $VA --duration 1s --json --attach netlink --ingress xdp --xdp-mode generic \
    >"$OUT/two_netlink_xdp.out" 2>"$OUT/two_netlink_xdp.err"
echo $? >"$OUT/two_netlink_xdp.rc"
in_a ping -c 20 -i 0.05 10.9.0.2 >/dev/null
BG=$FIRST
stop_case two_netlink
tc_state two_netlink.after

# agent: starts, attaches, serves /metrics and /api/v1/interfaces; `agent_degraded`: the
# same with BPF refused (no CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN) serves what it has.
NOBPF="setpriv --bounding-set -bpf,-perfmon,-sys_admin --inh-caps -bpf,-perfmon,-sys_admin"
agent_case() {
    c=$1 port=$2
    shift 2
    nsenter --net=/run/netns/$A "$@" "$ND" agent --listen 127.0.0.1:$port --database "$WORK/$c.db" \
        --interval 2s --no-probe --interfaces "$VA" >"$OUT/$c.out" 2>"$OUT/$c.err" &
    AGENT=$!
    # Its "serving" line first (builtins), then /readyz (two programs a try).
    wait_for "$OUT/$c.err" "netdoctor agent: serving" "$AGENT" || true
    i=0
    until in_a curl -sf http://127.0.0.1:$port/readyz >"$OUT/$c.readyz"; do
        i=$((i + 1))
        [ $i -gt 240 ] && break
        kill -0 $AGENT 2>/dev/null || break
        nap 0.5
    done
    in_a ping -c 5 -i 0.1 10.9.0.2 >/dev/null
    nap 5
    in_a curl -sf http://127.0.0.1:$port/metrics >"$OUT/$c.metrics"
    in_a curl -sf http://127.0.0.1:$port/api/v1/interfaces >"$OUT/$c.interfaces"
    kill -TERM $AGENT
    wait $AGENT
    echo $? >"$OUT/$c.rc"
    AGENT=
}
agent_case agent 9469
agent_case agent_degraded 9470 $NOBPF

# Kernel WireGuard over the veth (1500): MTU 1500 does not fit (critical, exit 2); 1420 fits.
if in_a ip link add $WA type wireguard 2>"$OUT/wireguard.unsupported"; then
    rm "$OUT/wireguard.unsupported"
    in_b ip link add $WB type wireguard
    umask 077
    wg genkey >"$WORK/a.key"
    wg genkey >"$WORK/b.key"
    in_a wg set $WA private-key "$WORK/a.key" listen-port 51820 \
        peer "$(wg pubkey <"$WORK/b.key")" allowed-ips 10.8.0.2/32 endpoint 10.9.0.2:51820
    in_b wg set $WB private-key "$WORK/b.key" listen-port 51820 \
        peer "$(wg pubkey <"$WORK/a.key")" allowed-ips 10.8.0.1/32 endpoint 10.9.0.1:51820
    in_a ip addr add 10.8.0.1/24 dev $WA
    in_b ip addr add 10.8.0.2/24 dev $WB
    for mtu in 1500 1420; do
        in_a ip link set $WA mtu $mtu up
        in_b ip link set $WB mtu $mtu up
        in_a ping -c 3 -i 0.2 -W 5 10.8.0.2 >/dev/null
        c=wg$mtu
        in_a "$ND" -v diagnose $WA --duration 3s --json >"$OUT/$c.out" 2>"$OUT/$c.err"
        echo $? >"$OUT/$c.rc"
    done
    # degraded: the same fault with BPF refused (no CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN):
    # configuration alone must still find it, and the missing signals be named.
    in_a ip link set $WA mtu 1500
    in_b ip link set $WB mtu 1500
    in_a ping -c 2 -i 0.2 -W 5 10.8.0.2 >/dev/null
    in_a $NOBPF "$ND" -v diagnose $WA --duration 2s --json >"$OUT/degraded.out" 2>"$OUT/degraded.err"
    echo $? >"$OUT/degraded.rc"
    # What netdoctor reads over generic netlink against `wg show` on the same tunnel: two
    # allowed IPs and a keepalive, an IPv4 endpoint, then an IPv6 one. `wg show` runs before
    # and after netdoctor.
    ipv6_on
    in_a wg set $WA peer "$(wg pubkey <"$WORK/b.key")" persistent-keepalive 25 \
        allowed-ips 10.8.0.2/32,fd08::/64
    for fam in 4 6; do
        if [ $fam = 6 ]; then
            in_a wg set $WA peer "$(wg pubkey <"$WORK/b.key")" endpoint "[fd09::2]:51820"
            in_b wg set $WB peer "$(wg pubkey <"$WORK/a.key")" endpoint "[fd09::1]:51820"
        fi
        # A session older than 120 s rekeys on this ping: let that handshake finish.
        in_a ping -c 2 -i 0.2 -W 5 10.8.0.2 >/dev/null
        nap 2
        # A keepalive may cross between the reads: the lane allows the counters and the
        # handshake to lie between the two `wg show`.
        in_a wg show $WA dump >"$OUT/wgshow$fam.before"
        in_a "$ND" wireguard $WA >"$OUT/wgshow$fam.out" 2>"$OUT/wgshow$fam.err"
        echo $? >"$OUT/wgshow$fam.rc"
        in_a wg show $WA dump >"$OUT/wgshow$fam.after"
    done
fi

stamp >>"$OUT/base.time"
run_suites
