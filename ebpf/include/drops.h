/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between drops.bpf.c and the Rust `drops` collector. */
#ifndef NETDOCTOR_DROPS_H
#define NETDOCTOR_DROPS_H

/* Interfaces x reasons x protocols actually seen stays small; when the table is full, new
 * combinations are counted in `overflow` instead of being lost silently. */
#define ND_MAX_DROP_KEYS 4096

struct nd_drop_key {
	__u32 netns;     /* network namespace inode of the device (or socket) */
	__u32 ifindex;   /* the device the skb was on (0 if none) */
	__u32 reason;    /* enum skb_drop_reason; names come from the kernel's BTF */
	__u16 ethertype; /* host byte order */
	__u8 l4proto;    /* IPPROTO_* for IPv4/IPv6, else 0 */
	__u8 pad;
};

struct nd_drop_stats {
	__u64 packets;
	__u64 bytes;
};

#endif /* NETDOCTOR_DROPS_H */
