/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Bounds-checked packet parsing shared by the XDP and tc programs.
 *
 * Every helper takes a cursor over [pos, end) and fails (returns < 0) instead of reading past
 * `end`; callers then count the packet as truncated and let it pass. Each access is checked
 * right before it happens, in the shape the verifier can follow: `ptr + size > end`.
 */
#ifndef NETDOCTOR_PARSE_H
#define NETDOCTOR_PARSE_H

#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "packet.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8

#define IPPROTO_HOPOPTS 0
#define IPPROTO_ROUTING 43
#define IPPROTO_FRAGMENT 44
#define IPPROTO_ICMPV6 58
#define IPPROTO_DSTOPTS 60

#define IP_MF 0x2000
#define IP_DF 0x4000
#define IP_OFFSET 0x1FFF

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02

/* 802.1ad outer + 802.1Q inner is the deepest stack seen in practice (QinQ). */
#define ND_MAX_VLAN 2
/* Extension headers walked before giving up; real traffic rarely has more than two. */
#define ND_MAX_EXTHDR 6

struct cursor {
	void *pos;
	void *end;
};

struct vlan_tag {
	__be16 tci;
	__be16 proto;
};

/* Fragment state of an IP packet. */
enum nd_frag {
	ND_FRAG_NONE = 0,
	ND_FRAG_FIRST = 1,
	ND_FRAG_LATER = 2,
};

/* What the network layer told us; addresses are copied into flow keys by the caller. */
struct l3_info {
	void *hdr;       /* struct iphdr or struct ipv6hdr */
	__u32 ip_len;    /* IP length the header declares (GSO: the whole super-packet); 0 when
			  * the header says 0 (IPv6 jumbogram, BIG TCP) */
	__u16 hdr_len;   /* network header length including IPv6 extension headers */
	__u8 family;     /* 4 or 6 */
	__u8 proto;      /* transport protocol after extension headers */
	__u8 frag;       /* enum nd_frag */
	__u8 df;         /* IPv4 DF set, or IPv6 (never fragmented by routers) */
};

/* Skips the Ethernet header and up to ND_MAX_VLAN VLAN tags and stores the inner EtherType
 * (network byte order) in *proto. Returns -1 if the frame is too short. */
static __always_inline int parse_eth(struct cursor *c, __be16 *proto)
{
	struct ethhdr *eth = c->pos;

	if ((void *)(eth + 1) > c->end)
		return -1;
	c->pos = eth + 1;
	*proto = eth->h_proto;

#pragma unroll
	for (int i = 0; i < ND_MAX_VLAN; i++) {
		if (*proto != bpf_htons(ETH_P_8021Q) && *proto != bpf_htons(ETH_P_8021AD))
			break;
		struct vlan_tag *tag = c->pos;

		if ((void *)(tag + 1) > c->end)
			return -1;
		*proto = tag->proto;
		c->pos = tag + 1;
	}
	return 0;
}

static __always_inline int parse_ipv4(struct cursor *c, struct l3_info *l3)
{
	struct iphdr *ip = c->pos;

	if ((void *)(ip + 1) > c->end)
		return -1;
	if (ip->version != 4 || ip->ihl < 5)
		return -1;
	__u32 hlen = ip->ihl * 4;

	if (c->pos + hlen > c->end)
		return -1;
	c->pos += hlen;

	__u16 frag = bpf_ntohs(ip->frag_off);

	l3->hdr = ip;
	l3->family = 4;
	l3->proto = ip->protocol;
	l3->hdr_len = hlen;
	l3->ip_len = bpf_ntohs(ip->tot_len);
	l3->df = !!(frag & IP_DF);
	if (frag & IP_OFFSET)
		l3->frag = ND_FRAG_LATER;
	else if (frag & IP_MF)
		l3->frag = ND_FRAG_FIRST;
	else
		l3->frag = ND_FRAG_NONE;
	return 0;
}

struct ipv6_ext {
	__u8 nexthdr;
	__u8 hdrlen; /* in 8-byte units, not counting the first 8 bytes */
};

struct ipv6_frag {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off; /* offset << 3 | M flag */
	__be32 id;
};

static __always_inline int parse_ipv6(struct cursor *c, struct l3_info *l3)
{
	struct ipv6hdr *ip6 = c->pos;

	if ((void *)(ip6 + 1) > c->end)
		return -1;
	if (ip6->version != 6)
		return -1;
	c->pos = ip6 + 1;

	__u8 next = ip6->nexthdr;
	__u16 hdr_len = sizeof(*ip6);

	l3->hdr = ip6;
	l3->family = 6;
	l3->df = 1;
	l3->frag = ND_FRAG_NONE;
	/* Payload length 0 means a jumbogram or BIG TCP: the caller uses the frame length. */
	l3->ip_len = ip6->payload_len ? bpf_ntohs(ip6->payload_len) + sizeof(*ip6) : 0;

#pragma unroll
	for (int i = 0; i < ND_MAX_EXTHDR; i++) {
		if (next == IPPROTO_FRAGMENT) {
			struct ipv6_frag *fh = c->pos;

			if ((void *)(fh + 1) > c->end)
				return -1;
			__u16 off = bpf_ntohs(fh->frag_off);

			/* Offset 0 without M is an atomic fragment (RFC 6946): not fragmented. */
			if (off & ~7)
				l3->frag = ND_FRAG_LATER;
			else if (off & 1)
				l3->frag = ND_FRAG_FIRST;
			next = fh->nexthdr;
			c->pos = fh + 1;
			hdr_len += sizeof(*fh);
			/* What follows a later fragment's header is payload, not more headers. */
			if (l3->frag == ND_FRAG_LATER)
				break;
			continue;
		}
		if (next != IPPROTO_HOPOPTS && next != IPPROTO_ROUTING && next != IPPROTO_DSTOPTS)
			break;
		struct ipv6_ext *ext = c->pos;

		if ((void *)(ext + 1) > c->end)
			return -1;
		__u32 len = (ext->hdrlen + 1) * 8;

		next = ext->nexthdr;
		if (c->pos + len > c->end)
			return -1;
		c->pos += len;
		hdr_len += len;
	}
	l3->proto = next;
	l3->hdr_len = hdr_len;
	return 0;
}

/* The IP version (4 or 6) of a frame with no VLAN tag, and in *l3 where its network header
 * starts: Ethernet with an IPv4 or IPv6 EtherType, or raw IP (wg, tun; the version nibble).
 * 0 for anything else, which the general parser (stages.bpf.h) takes. For the inline paths. */
static __always_inline __u8 plain_l3(void *data, void *data_end, __u32 link, void **l3)
{
	if (link == ND_LINK_ETHER) {
		struct ethhdr *eth = data;

		if ((void *)(eth + 1) > data_end)
			return 0;
		*l3 = eth + 1;
		if (eth->h_proto == bpf_htons(ETH_P_IP))
			return 4;
		if (eth->h_proto == bpf_htons(ETH_P_IPV6))
			return 6;
		return 0;
	}
	if (data + 1 > data_end)
		return 0;
	*l3 = data;
	return *(__u8 *)data >> 4;
}

/* Copies a network-order address into a 16-byte key field. Both sides are 32-bit aligned
 * fields (the packet's address fields by their header's layout, which the verifier lets
 * BPF read unaligned anyway); saying so lets clang copy words, where all it may assume of
 * a __u8 * is bytes: four loads and three shifts per word. */
static __always_inline void copy_addr(__u8 *dst, const void *src, __u8 family)
{
	__u8 *d = __builtin_assume_aligned(dst, 4);
	const __u8 *s = __builtin_assume_aligned(src, 4);

	if (family == 4)
		__builtin_memcpy(d, s, 4);
	else
		__builtin_memcpy(d, s, 16);
}

#endif /* NETDOCTOR_PARSE_H */
