/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What the packet data plane knows about one packet as it goes, in the order it learns it:
 * what the hook tells (struct nd_meta), then what the network and transport stages parse
 * (struct nd_l3, struct nd_l4).
 *
 * A header of its own because every part of the data plane reads these: the interface
 * counters, the stages, the ICMP too-big record, the fast path and account(). They hold
 * scalars only (offsets, lengths, addresses), never packet pointers: the slow path's stages
 * are global functions that hand each other their results through a per-CPU scratch entry
 * (struct nd_scratch in packet.bpf.c), and each re-derives packet pointers from its own
 * context with a bounds check.
 */
#ifndef NETDOCTOR_META_H
#define NETDOCTOR_META_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "compat.bpf.h"

/* What a hook knows about a packet before parsing it. */
struct nd_meta {
	__u32 len;      /* whole frame, fragments included */
	__u32 xdp;      /* from XDP: no GSO metadata */
	__u32 ifindex;
	__u32 gso_segs; /* >= 1 */
	__u32 gso_size; /* transport payload per segment, 0 when not GSO */
	__u32 dir;      /* enum nd_dir */
	__u32 link;     /* enum nd_link */
};

/* Zero is "not parsed": a stage that returns early without a verdict can never make a
 * zeroed result look like a valid packet. */
enum nd_status {
	ND_UNPARSED = 0,
	ND_OK = 1,
	ND_NON_IP = 2,
	ND_TRUNCATED = 3,
};

/* Network-layer facts: scalars only, so they can cross global-function calls. */
struct nd_l3 {
	__u8 saddr[16];
	__u8 daddr[16];
	__u32 l4_off;   /* transport header, from the start of the packet */
	__u32 ip_len;   /* IP length to account (header field or frame, see l3_parse) */
	__u16 hdr_len;  /* network header length including IPv6 extension headers */
	__u8 family;
	__u8 proto;
	__u8 frag;      /* enum nd_frag */
	__u8 df;
	__u8 status;    /* enum nd_status */
	__u8 pad;
};

/* Transport-layer facts the counters and the flow record need. */
struct nd_l4 {
	__u32 seq;
	__u32 payload;  /* transport payload bytes of the whole (super-)packet */
	__u16 sport;
	__u16 dport;
	__u16 hdr_len;  /* transport header length (what precedes the payload) */
	__u16 syn_mss;
	__u8 tcp_flags;
	__u8 encap;
	__u8 is_tcp;
	__u8 truncated;
	__u8 icmp_frag_needed;
	__u8 icmp6_too_big;
	__s8 wg_msg;
	__u8 wg_ok;     /* wg_idx and wg_ctr were read (a WireGuard message, 16 bytes linear) */
	__u32 wg_idx;   /* WireGuard: the index at offset 4 (sender's, or receiver's for data) */
	__u32 pad;
	__u64 wg_ctr;   /* WireGuard: the 8 bytes at offset 8 (data: the counter) */
};

/* The IP length to account for a network header `l3_off` bytes into the frame whose length
 * field says `field` (0 for none) and whose headers take `hdr_len`. Lengths come from the
 * headers and the frame size: the IP length field lies for GSO super-packets above 64 KiB
 * (BIG TCP writes 0) and Ethernet padding inflates the frame size of tiny packets, so the
 * smaller of the two when both are sane. Every parser (the stages, the fast path and the
 * local path) uses it, so that they account the same length. */
static __always_inline __u32 ip_len_of(const struct nd_meta *m, __u32 l3_off, __u32 field,
				       __u32 hdr_len)
{
	/* Every caller has bounds-checked the network header (hdr_len bytes from l3_off) in
	 * the linear area, and m->len counts at least that area, so the frame from l3_off holds
	 * hdr_len bytes or more: no underflow, and one unsigned comparison tests
	 * hdr_len <= field < frame_l3 (clang made the two-sided test branches and spills). */
	__u32 frame_l3 = m->len - l3_off;

	return field - hdr_len < frame_l3 - hdr_len ? field : frame_l3;
}

/* This packet's meta on XDP: no GSO metadata there. */
static __always_inline void xdp_meta(struct xdp_md *ctx, __u32 ifindex, __u32 link,
				     struct nd_meta *m)
{
	m->len = nd_xdp_len(ctx);
	m->xdp = 1;
	m->ifindex = ifindex;
	m->gso_segs = 1;
	m->gso_size = 0;
	m->dir = ND_DIR_INGRESS;
	m->link = link;
}

/* This packet's meta on tc. */
static __always_inline void skb_meta(struct __sk_buff *skb, __u32 ifindex, __u32 dir,
				     __u32 link, struct nd_meta *m)
{
	/* Read once: each read of a shared-info field is three loads (skb->head + skb->end). */
	__u32 gso_segs = skb->gso_segs;

	m->len = skb->len;
	m->xdp = 0;
	m->ifindex = ifindex;
	m->gso_segs = gso_segs ? gso_segs : 1;
	m->gso_size = skb->gso_size;
	m->dir = dir;
	m->link = link;
}

#endif /* NETDOCTOR_META_H */
