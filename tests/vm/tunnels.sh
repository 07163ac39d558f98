# The kernel lane's tunnel cases (sourced by cases.sh with the suite `tunnels`): bonds under
# kernel WireGuard, and every overlay the host's kernel lacks (GENEVE, GRE, GRETAP, IPIP, sit,
# ip6tnl), each with its MTU too big for the underlay and then right; 802.3ad bonds and GRE,
# GRETAP, sit and ip6tnl only with the parts `lacp` and `ip_tunnels` (one kernel runs them).
# Like cases.sh it only builds the setups, drives the binary and records; kernel_matrix.rs
# asserts.
#
# Uses cases.sh's $ND, $OUT, $T, $WORK, $A, $B, $VA, $VB, in_a, in_b.
# Per case CASE: CASE.out/.err/.rc as in cases.sh; `bond_*.members` (bytes each bond member
# sent during the case); `bond_lacp_*.bonding` (both ends' /proc/net/bonding once LACP agreed,
# or gave up); `tunnel_*.unsupported` when the kernel cannot create the device.

# diag CASE NS IFACE ARGS...: `netdoctor diagnose IFACE --json ARGS` in namespace NS.
diag() {
    c=$1 ns=$2 ifc=$3
    shift 3
    nsenter --net=/run/netns/$ns "$ND" -v diagnose "$ifc" --json "$@" >"$OUT/$c.out" 2>"$OUT/$c.err"
    echo $? >"$OUT/$c.rc"
}

# tx bytes of interface $2 in namespace $1 (`ip netns exec` mounts that namespace's /sys;
# nsenter would show the initial one's).
tx_bytes() { ip netns exec $1 cat /sys/class/net/$2/statistics/tx_bytes 2>/dev/null || echo 0; }

# Whether both ends of the 802.3ad bond aggregate both members and every member collects
# and distributes (LACP port state 63: active, fast, aggregating, in sync, collecting,
# distributing). /proc/net/bonding follows the reader's network namespace.
lacp_settled() {
    for ns in $BA $BB; do
        s=$(nsenter --net=/run/netns/$ns cat /proc/net/bonding/ndbond$T) || return 1
        echo "$s" | grep -q "Number of ports: 2" || return 1
        if echo "$s" | grep "port state:" | grep -vq "port state: 63"; then
            return 1
        fi
    done
}

# --- Bonds: kernel WireGuard over a two-member bond (veth members), iperf3 through the tunnel.
# bond CASE MODE POLICY
BA=ndba$T
BB=ndbb$T
bond_case() {
    c=$1 mode=$2 policy=$3
    ip netns add $BA && ip netns add $BB || return
    for m in 0 1; do
        ip link add ndm$m$T netns $BA type veth peer name ndm$m$T netns $BB
    done
    for ns in $BA $BB; do
        nsenter --net=/run/netns/$ns ip link set lo up
        # lacp_rate exists in 802.3ad mode only: LACP agrees within seconds, not 30.
        fast=
        [ "$mode" = 802.3ad ] && fast="lacp_rate fast"
        # shellcheck disable=SC2086
        if ! nsenter --net=/run/netns/$ns ip link add ndbond$T type bond mode $mode \
            xmit_hash_policy $policy miimon 100 $fast 2>"$OUT/$c.unsupported"; then
            ip netns del $BA; ip netns del $BB
            return
        fi
        for m in 0 1; do
            nsenter --net=/run/netns/$ns ip link set ndm$m$T master ndbond$T
            nsenter --net=/run/netns/$ns ip link set ndm$m$T up
        done
        nsenter --net=/run/netns/$ns ip link set ndbond$T up
    done
    rm -f "$OUT/$c.unsupported"
    nsenter --net=/run/netns/$BA ip addr add 10.20.0.1/24 dev ndbond$T
    nsenter --net=/run/netns/$BB ip addr add 10.20.0.2/24 dev ndbond$T
    # 802.3ad needs LACP to agree before the bond carries anything, and on both members
    # before the window: a member that joins the aggregator during it drops what is hashed
    # onto it until the partner collects, which the healthy twin would rightly report as loss.
    i=0
    until nsenter --net=/run/netns/$BA ping -c 1 -W 1 10.20.0.2 >/dev/null; do
        i=$((i + 1))
        [ $i -gt 20 ] && break
    done
    if [ "$mode" = 802.3ad ]; then
        i=0
        until lacp_settled || [ $i -gt 60 ]; do
            i=$((i + 1))
            nap 0.5
        done
        for ns in $BA $BB; do
            nsenter --net=/run/netns/$ns cat /proc/net/bonding/ndbond$T
        done >"$OUT/$c.bonding" 2>&1
    fi
    wg_pair $BA $BB ndbwa$T ndbwb$T 10.20.0.1 10.20.0.2 10.21.0 1420
    nsenter --net=/run/netns/$BB iperf3 -s -D -p 5301
    nap 0.5
    before0=$(tx_bytes $BA ndm0$T) before1=$(tx_bytes $BA ndm1$T)
    # netdoctor takes up to a minute to start under TCG: the upload lasts until it is done,
    # so that its window measures what each member carries. 5 Mbit/s puts about 1.9 MB
    # through the bond in the 3 s window (the bond rule decides from 1 MB); asked for
    # 20 Mbit/s, a TCG guest sharing its core delivered 8 and dropped some in its own queues,
    # which the layer3+4 twin rightly read as loss.
    nsenter --net=/run/netns/$BA iperf3 -c 10.21.0.2 -p 5301 -t 600 -b 5M >/dev/null 2>&1 &
    LOAD=$!
    nap 1
    diag $c $BA ndbwa$T --duration 3s --no-probe
    kill $LOAD 2>/dev/null
    wait $LOAD 2>/dev/null
    echo "$(($(tx_bytes $BA ndm0$T) - before0)) $(($(tx_bytes $BA ndm1$T) - before1))" >"$OUT/$c.members"
    ip netns pids $BA | xargs -r kill 2>/dev/null
    ip netns pids $BB | xargs -r kill 2>/dev/null
    ip netns del $BA
    ip netns del $BB
}

# wg_pair NS_A NS_B IF_A IF_B UNDERLAY_A UNDERLAY_B INNER_PREFIX MTU: a kernel WireGuard
# tunnel INNER_PREFIX.1 <-> .2 between the underlay addresses (IPv6 ones are bracketed).
wg_pair() {
    nsa=$1 nsb=$2 ifa=$3 ifb=$4 ua=$5 ub=$6 inner=$7 mtu=$8
    umask 077
    wg genkey >"$WORK/$ifa.key"
    wg genkey >"$WORK/$ifb.key"
    ep() { case $1 in *:*) echo "[$1]" ;; *) echo "$1" ;; esac; }
    nsenter --net=/run/netns/$nsa ip link add $ifa type wireguard
    nsenter --net=/run/netns/$nsb ip link add $ifb type wireguard
    nsenter --net=/run/netns/$nsa wg set $ifa private-key "$WORK/$ifa.key" listen-port 51830 \
        peer "$(wg pubkey <"$WORK/$ifb.key")" allowed-ips $inner.2/32 endpoint "$(ep $ub):51830"
    nsenter --net=/run/netns/$nsb wg set $ifb private-key "$WORK/$ifb.key" listen-port 51830 \
        peer "$(wg pubkey <"$WORK/$ifa.key")" allowed-ips $inner.1/32 endpoint "$(ep $ua):51830"
    nsenter --net=/run/netns/$nsa ip addr add $inner.1/24 dev $ifa
    nsenter --net=/run/netns/$nsb ip addr add $inner.2/24 dev $ifb
    nsenter --net=/run/netns/$nsa ip link set $ifa mtu $mtu up
    nsenter --net=/run/netns/$nsb ip link set $ifb mtu $mtu up
    nsenter --net=/run/netns/$nsa ping -c 2 -i 0.2 -W 5 $inner.2 >/dev/null
}

# The two scenarios that were #[ignore]d on the host (seed 5, diagnose_gateway's bond), then
# 802.3ad (part `lacp`); each layer-2 hash with its layer3+4 twin.
bond_case bond_xor_l2 balance-xor layer2
bond_case bond_xor_l34 balance-xor layer3+4
if wants lacp; then
    bond_case bond_lacp_l23 802.3ad layer2+3
    bond_case bond_lacp_l34 802.3ad layer3+4
fi

# --- Overlays over the veth of cases.sh (10.9.0.1 <-> 10.9.0.2, fd09::1 <-> fd09::2): for
# each type one tunnel, diagnosed at MTU 1500 (too big: critical) and at the largest MTU
# that fits while full-size pings cross it (healthy, and the overhead measured on the
# underlay equals the expected one).
ipv6_on

# overlay NAME FAMILY(4|6 inside) FITS TYPE ARGS...: creates ndtNAME$T on both ends.
overlay() {
    name=$1 inner=$2 fits=$3 type=$4
    shift 4
    ta=ndt$name$T
    local4=10.9.0.1 remote4=10.9.0.2 local6=fd09::1 remote6=fd09::2
    args_a=$(echo "$*" | sed "s/LOCAL6/$local6/; s/REMOTE6/$remote6/; s/LOCAL/$local4/; s/REMOTE/$remote4/")
    args_b=$(echo "$*" | sed "s/LOCAL6/$remote6/; s/REMOTE6/$local6/; s/LOCAL/$remote4/; s/REMOTE/$local4/")
    # shellcheck disable=SC2086
    if ! in_a ip link add $ta type $type $args_a 2>"$OUT/tunnel_$name.unsupported"; then
        return
    fi
    rm -f "$OUT/tunnel_$name.unsupported"
    # shellcheck disable=SC2086
    in_b ip link add $ta type $type $args_b
    if [ "$inner" = 4 ]; then
        in_a ip addr add 10.30.0.1/24 dev $ta
        in_b ip addr add 10.30.0.2/24 dev $ta
        peer=10.30.0.2 hdr=28
    else
        in_a ip addr add fd30::1/64 dev $ta nodad
        in_b ip addr add fd30::2/64 dev $ta nodad
        peer=fd30::2 hdr=48
    fi
    for side in in_a in_b; do
        $side ip link set $ta mtu 1500 up
    done
    in_a ping -c 2 -i 0.2 -W 5 $peer >/dev/null
    diag tunnel_$name $A $ta --duration 2s --no-probe
    for side in in_a in_b; do
        $side ip link set $ta mtu $fits
    done
    in_a ping -c 1 -W 5 $peer >/dev/null
    # Full-size pings (DF) both ways from before netdoctor starts until it has finished, so
    # that its window holds some however long it takes to load: the overhead is measured
    # from them. (nsenter execs ping, so $! is ping itself.)
    nsenter --net=/run/netns/$A ping -q -i 0.2 -W 2 -M do -s $((fits - hdr)) $peer >/dev/null 2>&1 &
    PING=$!
    diag tunnel_${name}_fits $A $ta --duration 3s --no-probe
    kill $PING 2>/dev/null
    wait $PING 2>/dev/null
    in_a ip link del $ta
    in_b ip link del $ta 2>/dev/null
}

overlay geneve 4 1450 geneve id 42 remote REMOTE ttl 64 df set udpcsum
overlay ipip 4 1480 ipip local LOCAL remote REMOTE
if wants ip_tunnels; then
    overlay gre 4 1464 gre local LOCAL remote REMOTE key 7 csum seq
    overlay gretap 4 1462 gretap local LOCAL remote REMOTE
    overlay sit 6 1480 sit local LOCAL remote REMOTE
    overlay ip6tnl 6 1452 ip6tnl local LOCAL6 remote REMOTE6 mode ip6ip6
fi
