/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The general parser's stages: the network layer (l3_parse) and the transport layer
 * (l4_parse), for every packet the fast path does not take (fast_path.bpf.h).
 *
 * They handle whatever a link carries: VLAN stacks, IPv4 options, IPv6 extension headers,
 * fragments, TCP options (a SYN's MSS), ICMP and ICMPv6 (too-big messages are recorded,
 * too_big.bpf.h), UDP tunnels and GRE and IP-in-IP ones (encap.bpf.h), truncated and bogus headers. Each stage reads the
 * packet from its context's data pointers with a bounds check and leaves its results in a
 * struct of scalars (meta.bpf.h), so that packet.bpf.c can wrap each stage in a global function
 * the verifier checks once, on its own, instead of once per path through everything before
 * it (see packet.bpf.c).
 */
#ifndef NETDOCTOR_STAGES_H
#define NETDOCTOR_STAGES_H

#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "parse.bpf.h"
#include "encap.bpf.h"
#include "meta.bpf.h"
#include "too_big.bpf.h"

/* Transport headers start at most this far into a packet we parse (6 IPv6 extension
 * headers can be long); farther ones are counted as truncated. Bounding the offset lets
 * the verifier accept `data + offset`. */
#define ND_MAX_L4_OFF 0x3fff

/* Fills `out` from a parsed network header; `l4` is where the transport header starts. */
static __always_inline void l3_finish(void *data, void *l4, const struct nd_meta *m,
				      const struct l3_info *l3, struct nd_l3 *out)
{
	if (l3->family == 4) {
		struct iphdr *ip = l3->hdr;

		copy_addr(out->saddr, &ip->saddr, 4);
		copy_addr(out->daddr, &ip->daddr, 4);
	} else {
		struct ipv6hdr *ip6 = l3->hdr;

		copy_addr(out->saddr, &ip6->saddr, 16);
		copy_addr(out->daddr, &ip6->daddr, 16);
	}
	out->ip_len = ip_len_of(m, l3->hdr - data, l3->ip_len, l3->hdr_len);
	out->l4_off = l4 - data;
	out->hdr_len = l3->hdr_len;
	out->family = l3->family;
	out->proto = l3->proto;
	out->frag = l3->frag;
	out->df = l3->df;
	out->status = ND_OK;
}

static __always_inline void l3_parse(void *data, void *data_end, const struct nd_meta *m,
				     struct nd_l3 *out)
{
	struct cursor c = { data, data_end };
	struct l3_info l3 = {};
	int ret = -1;

	if (m->link == ND_LINK_RAWIP) {
		__u8 *first = c.pos;

		if ((void *)(first + 1) > c.end) {
			out->status = ND_TRUNCATED;
			return;
		}
		if ((*first >> 4) == 4)
			ret = parse_ipv4(&c, &l3);
		else if ((*first >> 4) == 6)
			ret = parse_ipv6(&c, &l3);
		else {
			out->status = ND_NON_IP;
			return;
		}
	} else {
		__be16 proto = 0;

		if (parse_eth(&c, &proto) == 0) {
			if (proto == bpf_htons(ETH_P_IP))
				ret = parse_ipv4(&c, &l3);
			else if (proto == bpf_htons(ETH_P_IPV6))
				ret = parse_ipv6(&c, &l3);
			else {
				out->status = ND_NON_IP;
				return;
			}
		}
	}
	if (ret < 0) {
		out->status = ND_TRUNCATED;
		return;
	}

	l3_finish(data, c.pos, m, &l3, out);
}

/* MSS option of a SYN; 0 when absent. MSS is conventionally the first option, so a short
 * walk finds it. */
static __always_inline __u16 tcp_syn_mss(struct tcphdr *th, void *end)
{
	__u8 *opt = (void *)(th + 1);
	__u8 *opt_end = (void *)th + th->doff * 4;

	for (int i = 0; i < 10; i++) {
		if ((void *)(opt + 4) > end || opt + 4 > opt_end)
			return 0;
		__u8 kind = opt[0];

		if (kind == 0)
			return 0;
		if (kind == 1) {
			opt++;
			continue;
		}
		__u8 len = opt[1];

		if (kind == 2 && len == 4)
			return (__u16)opt[2] << 8 | opt[3];
		if (len < 2)
			return 0;
		opt += len;
	}
	return 0;
}

/* The fixed TCP header's facts; `l4_len` is the IP payload length. */
static __always_inline void tcp_fields(struct tcphdr *th, __u32 l4_len, struct nd_l4 *l4)
{
	l4->is_tcp = 1;
	l4->sport = bpf_ntohs(th->source);
	l4->dport = bpf_ntohs(th->dest);
	l4->hdr_len = th->doff * 4;
	l4->seq = bpf_ntohl(th->seq);
	l4->tcp_flags = ((__u8 *)th)[13];
	l4->payload = l4_len > l4->hdr_len ? l4_len - l4->hdr_len : 0;
}

/* The UDP header's facts and the encapsulation its payload carries; `l4_len` is the IP
 * payload length. */
static __always_inline void udp_fields(struct udphdr *uh, void *end, __u32 l4_len,
				       struct nd_l4 *l4)
{
	int wg;

	l4->sport = bpf_ntohs(uh->source);
	l4->dport = bpf_ntohs(uh->dest);
	l4->hdr_len = sizeof(*uh);
	l4->payload = l4_len > sizeof(*uh) ? l4_len - sizeof(*uh) : 0;
	/* The slow path always compares the ports: it has no interface at hand, and a port
	 * that is not configured is 0, matching nothing. */
	l4->encap = classify_udp(l4->sport, l4->dport, (__u8 *)(uh + 1), end, l4->payload, 1,
				 &wg);
	l4->wg_msg = wg;
	if (wg >= 0)
		l4->wg_ok = wg_fields((__u8 *)(uh + 1), end, &l4->wg_idx, &l4->wg_ctr);
}

static __always_inline void l4_parse(void *data, void *data_end, const struct nd_meta *m,
				     const struct nd_l3 *l3, struct nd_l4 *l4)
{
	l4->wg_msg = -1;
	if (l3->frag == ND_FRAG_LATER)
		return; /* no transport header in this fragment */
	__u32 off = l3->l4_off;

	if (off > ND_MAX_L4_OFF) {
		l4->truncated = 1;
		return;
	}
	struct cursor c = { data + off, data_end };
	__u32 l4_len = l3->ip_len > l3->hdr_len ? l3->ip_len - l3->hdr_len : 0;

	if (l3->proto == IPPROTO_TCP) {
		struct tcphdr *th = c.pos;

		if ((void *)(th + 1) > c.end || th->doff < 5) {
			l4->truncated = 1;
			return;
		}
		/* Options cut off by the end of the packet: the fixed header is still usable. */
		if ((void *)th + th->doff * 4 > c.end)
			l4->truncated = 1;
		tcp_fields(th, l4_len, l4);
		if (l4->tcp_flags & TCP_FLAG_SYN)
			l4->syn_mss = tcp_syn_mss(th, c.end);
	} else if (l3->proto == IPPROTO_UDP) {
		struct udphdr *uh = c.pos;

		if ((void *)(uh + 1) > c.end) {
			l4->truncated = 1;
			return;
		}
		udp_fields(uh, c.end, l4_len, l4);
	} else if ((l3->proto == IPPROTO_ICMP && l3->family == 4) ||
		   (l3->proto == IPPROTO_ICMPV6 && l3->family == 6)) {
		/* type, code, checksum, then 4 bytes of type-specific data. */
		__u8 *ic = c.pos;

		if ((void *)(ic + 8) > c.end) {
			l4->truncated = 1;
			return;
		}
		__u8 type = ic[0], code = ic[1];

		l4->sport = (__u16)type << 8 | code;
		l4->hdr_len = 8;
		if (l3->family == 4) {
			if (type == 0 || type == 8) /* echo reply / request: identifier */
				l4->dport = (__u16)ic[4] << 8 | ic[5];
			if (type == 3 && code == 4) {
				l4->icmp_frag_needed = 1;
				record_ptb(m, l3, ic + 8, c.end, (__u32)ic[6] << 8 | ic[7]);
			}
		} else {
			if (type == 128 || type == 129)
				l4->dport = (__u16)ic[4] << 8 | ic[5];
			if (type == 2) {
				l4->icmp6_too_big = 1;
				record_ptb(m, l3, ic + 8, c.end,
					   (__u32)ic[4] << 24 | (__u32)ic[5] << 16 |
						   (__u32)ic[6] << 8 | ic[7]);
			}
		}
	} else {
		/* GRE, IP in IP: tunnels without UDP (encap.bpf.h). */
		l4->encap = classify_ip(l3->proto, c.pos, c.end);
	}
}

#endif /* NETDOCTOR_STAGES_H */
