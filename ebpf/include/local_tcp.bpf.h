/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The local path: TCP segments of this host's own connections, counted per interface and
 * never given a flow record.
 *
 * Socket telemetry (sockets.bpf.c: iter/tcp and the tracepoints) already describes a local
 * connection exactly - bytes, segments, retransmissions, RTT, congestion control, MSS and
 * path MTU - so a per-flow record of its packets repeats what the socket knows, and was most
 * of what the data plane cost on a busy host (measured by `.ci/bench`, docs/performance.md).
 * Such a segment pays only what the interface's figures need: the interface counters and
 * size histogram (count_packet, count_segments), the local segment count (local_segs,
 * in the same cache line as the packet counts) and the largest segment (for the tunnel
 * overhead measured on full-size packets). A received one also pays a passive
 * retransmission check, so that the interface's retransmission ratio still covers data
 * this host receives: its sender's retransmissions are counted by no local socket. A sent
 * one does not: its socket counts its retransmissions exactly (sockets.bpf.c), and the
 * agent adds those of the sockets on the interface to the ratio. Leaving the check out of
 * nd_tc_egress made it 11-14 ns cheaper per run under traffic (docs/performance.md).
 *
 * Which segments are local, decided from the packet and never guessed:
 * - egress: skb->sk is set and its local port is the segment's source port. Forwarded and
 *   bridged packets carry no socket; encapsulated packets (VXLAN, GENEVE, WireGuard, GRE,
 *   IPIP) can carry the inner connection's socket, but their outer header is not TCP.
 * - ingress: a PACKET_HOST frame to one of this host's addresses (`local_addrs`, written by
 *   the agent), for a family the host does not forward: with forwarding off nothing
 *   addressed here can leave again, whereas a forwarding host can DNAT it onward (port
 *   forwards, Kubernetes NodePorts), which must keep its flow record. The interface's
 *   ND_PATH_LOCAL_IN4/IN6 bits say which families can be local at all, so that a router's
 *   received packets never load `local_addrs`.
 * - SYNs never take it: their MSS option is read by the stages and kept in the flow table.
 *
 * The agent turns the path on (ND_PATH_LOCAL_TCP in each interface's `path`) only where
 * socket telemetry is loaded, and `--local-tcp packets` turns it off: every segment then
 * gets its flow record.
 *
 * The retransmission check keeps one sequence entry per received connection and interface
 * in `local_seq` (a hash of the addresses, ports and interface picks it, a 32-bit
 * tag says whose it is). A connection finding another's entry takes it over and starts its
 * check afresh: connections that collide can miss retransmissions, never invent them for
 * in-order data. The connections' own figures come from their sockets; this count only
 * feeds the interface's ratio.
 *
 * Loading that entry was the largest single cost of the local path in a profile: between
 * two segments of a bulk transfer the socket copies tens of kilobytes, which evicts it. So
 * the interface's own first line, which every packet loads anyway, holds a hint per CPU
 * (seq_tag, seq_high in struct nd_iface_dir): the connection whose data this CPU saw last
 * there, by a 16-bit tag, and the highest sequence end it saw. A segment starting at or
 * beyond that end cannot be one this CPU has seen, so it only stores its end into the hint
 * and, without loading it, into its entry; every other segment (another connection, or data
 * at or below the hint's end: a retransmission or a reordering) takes the full check
 * against the entry. The hint only ever skips a check, never makes a count: a stale hint
 * (the connection's data went through another CPU meanwhile) or a tag shared by two
 * connections can miss a retransmission, and can set the entry back to an earlier end
 * (which misses more, later), but every count still compares with the end of a segment the
 * entry's connection sent, and the entry is written by every segment, so it is never 2^31
 * behind (where a 32-bit comparison would turn around). tests/tests/lab/dataplane_test_run/
 * local_path.rs holds it to this.
 */
#ifndef NETDOCTOR_LOCAL_TCP_H
#define NETDOCTOR_LOCAL_TCP_H

#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "parse.bpf.h"
#include "meta.bpf.h"
#include "iface_stats.bpf.h"

#ifndef PACKET_HOST
#define PACKET_HOST 0
#endif

/* Mappable for the page alignment only: the IPv4 test reads the entry's first line. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nd_local_addrs);
} local_addrs SEC(".maps");

/* Mappable for the page alignment only: one cache line per entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ND_LOCAL_SEQ_SLOTS);
	__type(key, __u32);
	__type(value, struct nd_local_seq);
} local_seq SEC(".maps");

_Static_assert(sizeof(struct nd_local_seq) == 64, "a sequence entry is one cache line");

static __always_inline int local_v4(const struct nd_local_addrs *a, __u32 daddr)
{
	int hit = 0;

#pragma unroll
	for (int i = 0; i < ND_LOCAL_V4; i++)
		hit |= a->v4[i] == daddr;
	return hit && a->v4_ok;
}

static __always_inline int local_v6(const struct nd_local_addrs *a, const struct in6_addr *d)
{
	const __u64 *w = (const __u64 *)d;
	int hit = 0;

#pragma unroll
	for (int i = 0; i < ND_LOCAL_V6; i++) {
		const __u64 *v = (const __u64 *)a->v6[i];

		hit |= ((v[0] ^ w[0]) | (v[1] ^ w[1])) == 0;
	}
	return hit && a->v6_ok;
}

/* Segments of this packet to count as carrying data seen before (see above): the hint in
 * `ifs` for data beyond what this CPU saw of the connection, else the connection's entry.
 * At most one load and one store of the entry, no clock and no idle test. */
static __always_inline __u32 local_seq_check(struct nd_iface_dir *ifs, __u32 h, __u32 seq,
					     __u32 payload, __u32 segs)
{
	__u32 idx = h >> (32 - ND_LOCAL_SEQ_BITS);
	__u32 tag = h | 1;
	__u16 hint = (__u16)h | 1; /* the low bits: the high ones pick the entry */
	struct nd_local_seq *e = bpf_map_lookup_elem(&local_seq, &idx);
	__u32 end = seq + payload;

	if (!e)
		return 0;
	if (ifs->seq_tag == hint && (__s32)(seq - ifs->seq_high) >= 0) {
		ifs->seq_high = end;
		e->state = (__u64)tag << 32 | end;
		return 0;
	}

	__u64 st = e->state;
	__u32 high = (__u32)st;
	__u32 retrans = 0;

	if ((__u32)(st >> 32) != tag) {
		/* Free, or another connection's: this one's check starts here. */
		high = end;
	} else {
		if ((__s32)(seq - high) < 0)
			retrans = segs;
		if ((__s32)(end - high) > 0)
			high = end;
	}
	e->state = (__u64)tag << 32 | high;
	ifs->seq_tag = hint;
	ifs->seq_high = high;
	return retrans;
}

/* Takes the packet when it is a non-SYN TCP segment of a local connection (see above) and
 * counts it; returns 1 then, else 0 having counted nothing. Inline: on the hot path. */
static __always_inline int local_tcp_account(struct __sk_buff *skb, struct nd_iface_dir *ifs,
					     __u32 ifindex, __u32 dir)
{
	struct bpf_sock *sk = NULL;
	const struct nd_local_addrs *a = NULL;

	/* The cheapest test first: forwarded and bridged traffic leaves here. */
	if (dir == ND_DIR_EGRESS) {
		sk = skb->sk;
		if (!sk)
			return 0;
	} else {
		__u32 zero = 0;

		if (skb->pkt_type != PACKET_HOST ||
		    !(ifs->path & (ND_PATH_LOCAL_IN4 | ND_PATH_LOCAL_IN6)))
			return 0;
		a = bpf_map_lookup_elem(&local_addrs, &zero);
		if (!a)
			return 0;
	}

	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	void *pos = data;
	__u8 version = plain_l3(data, data_end, ifs->link, &pos);

	__u32 ip_field, hdr_len, h;
	__u8 df;
	struct tcphdr *th;

	if (version == 4) {
		struct iphdr *ip = pos;

		if ((void *)(ip + 1) > data_end || *(__u8 *)ip != 0x45 ||
		    ip->protocol != IPPROTO_TCP || (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)))
			return 0;
		th = (void *)(ip + 1);
		if ((void *)(th + 1) > data_end)
			return 0;
		if (a && (!(ifs->path & ND_PATH_LOCAL_IN4) || !local_v4(a, ip->daddr)))
			return 0;
		ip_field = bpf_ntohs(ip->tot_len);
		hdr_len = sizeof(*ip);
		df = !!(ip->frag_off & bpf_htons(IP_DF));
		h = ip->saddr ^ ip->daddr;
	} else if (version == 6) {
		struct ipv6hdr *ip6 = pos;

		if ((void *)(ip6 + 1) > data_end || ip6->version != 6 || ip6->nexthdr != IPPROTO_TCP)
			return 0;
		th = (void *)(ip6 + 1);
		if ((void *)(th + 1) > data_end)
			return 0;
		if (a && (!(ifs->path & ND_PATH_LOCAL_IN6) || !local_v6(a, &ip6->daddr)))
			return 0;
		ip_field = ip6->payload_len ? bpf_ntohs(ip6->payload_len) + sizeof(*ip6) : 0;
		hdr_len = sizeof(*ip6);
		df = 1;
		h = ip6->saddr.in6_u.u6_addr32[3] ^ ip6->daddr.in6_u.u6_addr32[3] ^
		    ip6->saddr.in6_u.u6_addr32[1];
	} else {
		return 0;
	}
	/* The socket's own segment: its local port is the source port (a raw or packet socket
	 * sending TCP has no such port). */
	if (sk && sk->src_port != bpf_ntohs(th->source))
		return 0;
	if (th->doff < 5 || (((__u8 *)th)[13] & TCP_FLAG_SYN))
		return 0;

	/* The packet's meta is read only now, for a local segment: read before the lookup of
	 * local_addrs (a helper call to clang, which clobbers r1-r5), its fields went to the
	 * stack and back (in side-by-side runs ~3 ns per received segment together with the
	 * lengths below and the size buckets' table, docs/performance.md). */
	struct nd_meta meta;
	const struct nd_meta *m = &meta;

	skb_meta(skb, ifindex, dir, ifs->link, &meta);

	struct nd_dir_stats *ds = &ifs->s;
	__u32 l4_hdr = th->doff * 4;
	__u32 ip_len = ip_len_of(m, pos - data, ip_field, hdr_len);
	__u32 l4_len = ip_len - hdr_len; /* ip_len_of() returns at least hdr_len here */
	__u32 payload = l4_len > l4_hdr ? l4_len - l4_hdr : 0;
	__u32 seg_len;
	__u32 segs;

	count_packet(ifs, m);
	segs = count_segments(ifs, m, ip_len, hdr_len + l4_hdr, 1, payload, df, &seg_len);
	ds->local_segs += segs;
	if (seg_len >= ds->local_max_seg) {
		if (seg_len > ds->local_max_seg) {
			ds->local_max_seg = seg_len;
			ds->local_max_hits = 0;
		}
		ds->local_max_hits++;
	}
	/* Received data only (see above); the egress program has no check at all. */
	if (payload && m->dir == ND_DIR_INGRESS) {
		/* Addresses, ports and interface: a connection received at two hooks (a
		 * bond's member and the bond) has an entry at each, so that one segment seen
		 * at both does not look received twice. */
		h = (h ^ *(__u32 *)&th->source ^ m->ifindex) * 0x9e3779b9;
		__u32 r = local_seq_check(ifs, h, bpf_ntohl(th->seq), payload, segs);

		if (r)
			ds->local_retrans += r;
	}
	return 1;
}

#endif /* NETDOCTOR_LOCAL_TCP_H */
