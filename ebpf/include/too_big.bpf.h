/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ICMP "fragmentation needed" and ICMPv6 "packet too big" messages, one `ptb_events` entry
 * per reporting router and quoted flow.
 *
 * They are path-MTU discovery at work: a router on the path says which packet was too big
 * and what MTU it can carry. The interface counters only count them; this record keeps
 * which router said it, the MTU it announced and the flow it quoted, which is what
 * `netdoctor flows` shows: the path and the flow that a smaller MTU hurts.
 */
#ifndef NETDOCTOR_TOO_BIG_H
#define NETDOCTOR_TOO_BIG_H

#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "parse.bpf.h"
#include "meta.bpf.h"
#include "compat.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ND_MAX_PTB);
	__type(key, struct nd_ptb_key);
	__type(value, struct nd_ptb_stats);
} ptb_events SEC(".maps");

/* Records an ICMP frag-needed / ICMPv6 packet-too-big: who sent it, the MTU it announces and
 * the flow it quotes. `quote` points at the quoted IP header. */
static __always_inline void record_ptb(const struct nd_meta *m, const struct nd_l3 *l3,
				       void *quote, void *data_end, __u32 mtu)
{
	struct nd_ptb_key key = {};
	struct cursor c = { quote, data_end };
	struct l3_info inner = {};

	key.ifindex = m->ifindex;
	key.dir = m->dir;
	key.family = l3->family;
	__builtin_memcpy(key.from, l3->saddr, 16);
	if (l3->family == 4) {
		/* The quote may be cut anywhere; record what we have. */
		if (parse_ipv4(&c, &inner) == 0) {
			struct iphdr *ip = inner.hdr;

			copy_addr(key.inner_saddr, &ip->saddr, 4);
			copy_addr(key.inner_daddr, &ip->daddr, 4);
		}
	} else {
		struct ipv6hdr *ip6 = c.pos;

		/* Quoted extension headers are not walked: ports stay 0 for such quotes. */
		if ((void *)(ip6 + 1) <= c.end) {
			copy_addr(key.inner_saddr, &ip6->saddr, 16);
			copy_addr(key.inner_daddr, &ip6->daddr, 16);
			inner.proto = ip6->nexthdr;
			c.pos = ip6 + 1;
		}
	}
	key.inner_proto = inner.proto;
	if (inner.proto == IPPROTO_TCP || inner.proto == IPPROTO_UDP) {
		__be16 *ports = c.pos;

		if ((void *)(ports + 2) <= c.end) {
			key.inner_sport = bpf_ntohs(ports[0]);
			key.inner_dport = bpf_ntohs(ports[1]);
		}
	}

	struct nd_ptb_stats *st = bpf_map_lookup_elem(&ptb_events, &key);

	if (!st) {
		struct nd_ptb_stats init = {};

		bpf_map_update_elem(&ptb_events, &key, &init, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&ptb_events, &key);
		if (!st)
			return;
	}
	__sync_fetch_and_add(&st->count, 1);
	st->mtu = mtu;
	st->last_ns = nd_now_ns();
}

#endif /* NETDOCTOR_TOO_BIG_H */
