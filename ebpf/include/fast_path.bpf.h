/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The fast path: the common case in one pass, inline. TCP or UDP over IPv4 without options
 * or over IPv6 without extension headers, straight on Ethernet or raw IP, not a fragment,
 * its transport header (TCP options included) in the linear area, not a SYN (whose MSS
 * option the stages read). Most packets of a busy link or tunnel underlay are that, and
 * for them the stages cost more than the parsing: calls whose returns go through the
 * kernel's return thunk (SRSO mitigation), general walks (VLAN tags, IPv4 options,
 * extension headers, ICMP) whose code TCP's own processing evicts from the instruction
 * cache between two packets, and intermediate results copied from struct to struct. This
 * path parses straight into the flow key and the rest of `p`, and counts the interface
 * counters as the stages and account() would for the same packet
 * (fast_path_agrees_with_stages runs both on the same packets), then returns 1 and leaves
 * the flow record to the caller; for any other packet it counts nothing and returns 0,
 * and the stages take it.
 */
#ifndef NETDOCTOR_FAST_PATH_H
#define NETDOCTOR_FAST_PATH_H

#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "parse.bpf.h"
#include "encap.bpf.h"
#include "meta.bpf.h"
#include "iface_stats.bpf.h"
#include "flow_table.bpf.h"

/* fast_account() writes the key as five 64-bit words and the ports' 32-bit word. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fast_account() writes struct nd_flow_key as little-endian words"
#endif
_Static_assert(__builtin_offsetof(struct nd_flow_key, dir) == 4 &&
		       __builtin_offsetof(struct nd_flow_key, proto) == 5 &&
		       __builtin_offsetof(struct nd_flow_key, family) == 6 &&
		       __builtin_offsetof(struct nd_flow_key, saddr) == 8 &&
		       __builtin_offsetof(struct nd_flow_key, daddr) == 24 &&
		       __builtin_offsetof(struct nd_flow_key, sport) == 40,
	       "fast_account() writes the key's words in this layout");

static __always_inline int fast_account(void *data, void *data_end, struct nd_iface_dir *ifs,
					const struct nd_meta *m, struct nd_pkt *p)
{
	void *pos = data;
	__u8 version = plain_l3(data, data_end, m->link, &pos);

	__u32 ip_field, hdr_len;
	__u8 proto, df;
	void *l4;

	if (version == 4) {
		struct iphdr *ip = pos;

		if ((void *)(ip + 1) > data_end)
			return 0;
		/* Version 4 with a 20-byte header; neither more fragments nor an offset. */
		if (*(__u8 *)ip != 0x45 || (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)))
			return 0;
		proto = ip->protocol;
		ip_field = bpf_ntohs(ip->tot_len);
		hdr_len = sizeof(*ip);
		df = !!(ip->frag_off & bpf_htons(IP_DF));
		p->kw.w[1] = ip->saddr;
		p->kw.w[2] = 0;
		p->kw.w[3] = ip->daddr;
		p->kw.w[4] = 0;
		l4 = ip + 1;
	} else if (version == 6) {
		struct ipv6hdr *ip6 = pos;

		if ((void *)(ip6 + 1) > data_end || ip6->version != 6)
			return 0;
		const __u64 *sa = (const __u64 *)&ip6->saddr;
		const __u64 *da = (const __u64 *)&ip6->daddr;

		proto = ip6->nexthdr;
		ip_field = ip6->payload_len ? bpf_ntohs(ip6->payload_len) + sizeof(*ip6) : 0;
		hdr_len = sizeof(*ip6);
		df = 1;
		p->kw.w[1] = sa[0];
		p->kw.w[2] = sa[1];
		p->kw.w[3] = da[0];
		p->kw.w[4] = da[1];
		l4 = ip6 + 1;
	} else {
		return 0;
	}

	__u32 ip_len = ip_len_of(m, pos - data, ip_field, hdr_len);
	__u32 l4_len = ip_len - hdr_len; /* ip_len_of() returns at least hdr_len */
	__u32 l4_hdr;
	__u16 sport, dport;
	__u8 wg_ok = 0;

	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = l4;

		if ((void *)(th + 1) > data_end || th->doff < 5 ||
		    (void *)th + th->doff * 4 > data_end || (((__u8 *)th)[13] & TCP_FLAG_SYN))
			return 0;
		l4_hdr = th->doff * 4;
		sport = bpf_ntohs(th->source);
		dport = bpf_ntohs(th->dest);
		p->seq = bpf_ntohl(th->seq);
		p->payload = l4_len > l4_hdr ? l4_len - l4_hdr : 0;
		p->tcp_flags = ((__u8 *)th)[13];
		p->is_tcp = 1;
		p->encap = ND_ENCAP_NONE;
		p->wg_msg = -1;
	} else if (proto == IPPROTO_UDP) {
		struct udphdr *uh = l4;
		int wg;

		if ((void *)(uh + 1) > data_end)
			return 0;
		l4_hdr = sizeof(*uh);
		sport = bpf_ntohs(uh->source);
		dport = bpf_ntohs(uh->dest);
		p->encap = classify_udp(sport, dport, (__u8 *)(uh + 1), data_end,
					l4_len > l4_hdr ? l4_len - l4_hdr : 0,
					ifs->path & ND_PATH_USER_PORTS, &wg);
		p->wg_msg = wg;
		/* Read only for WireGuard (wg_path.bpf.h): other packets never look at them. */
		if (wg >= 0)
			wg_ok = wg_fields((__u8 *)(uh + 1), data_end, &p->wg_idx, &p->wg_ctr);
		p->seq = 0;
		p->payload = 0;
		p->tcp_flags = 0;
		p->is_tcp = 0;
	} else {
		return 0;
	}
	/* struct nd_flow_key's first word and its ports, little-endian (see the assert). */
	p->kw.w[0] = m->ifindex | (__u64)(m->dir & 1) << 32 | (__u64)proto << 40 |
		     (__u64)version << 48;
	p->kw.ports = sport | (__u32)dport << 16;
	p->syn_mss = 0;
	p->wg_ok = wg_ok; /* with pad, the word the two pad bytes were */
	p->pad = 0;

	/* What account() counts of a packet that is neither truncated, a fragment nor ICMP. */
	__u32 seg_len;
	__u32 segs;

	count_packet(ifs, m);
	segs = count_segments(ifs, m, ip_len, hdr_len + l4_hdr, p->is_tcp, p->payload, df,
			      &seg_len);
	p->len = m->len;
	p->segs = segs;
	p->seg_len = seg_len;
	return 1;
}

#endif /* NETDOCTOR_FAST_PATH_H */
