/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The TCP sequence table (`flow_seq`): how the flow record counts retransmitted segments.
 *
 * A header of its own because it is the one part of the flow record whose state is shared
 * by every CPU rather than kept per CPU, and the one that hands state from flow to flow
 * (the comment above seq_check() says why and how). The flow record (flow_record() in
 * flow_cache.bpf.h) checks a flow's own entry inline and calls nd_seq_slow() for the rest.
 */
#ifndef NETDOCTOR_FLOW_SEQ_H
#define NETDOCTOR_FLOW_SEQ_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "compat.bpf.h"
#include "flow_table.bpf.h"

/* Jiffies without a data segment after which a sequence entry may be handed over. */
#define ND_SEQ_IDLE_J 4

/* TCP sequence state shared by all CPUs (see nd_seq_slow); mappable for the page alignment
 * only: one cache line per entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ND_SEQ_SLOTS);
	__type(key, __u32);
	__type(value, struct nd_seq_slot);
} flow_seq SEC(".maps");

_Static_assert(sizeof(struct nd_seq_slot) == 64, "a sequence entry is one cache line");

/*
 * Passive retransmission detection from sequence numbers: data starting before the highest
 * sequence already seen was sent before (or arrived out of order). Works on traffic a
 * gateway only forwards, where no socket exists to ask.
 *
 * The highest sequence end must be one per flow, not one per CPU: a flow's segments are
 * processed on several CPUs (veth and RPS deliver on the sender's CPU, which changes as the
 * sender migrates; TCP sends from the process and from softirqs). A per-CPU state would see
 * an increasing subsequence - no false counts - but would miss a retransmission landing on
 * a CPU that has not seen the later segments (a fast retransmit sent from the ACK softirq
 * on the other CPU, say). So the state is shared: `flow_seq`, indexed by the flow's hash,
 * holds tag << 32 | highest end in one word (one 64-bit store: never torn) for the flow
 * whose tag it carries. The common case reads and writes that one cache line.
 *
 * An entry belongs to one flow at a time. A flow that finds another flow's tag in its entry
 * keeps its state in its table entry (seq_high/seq_valid, as before the cache) until the
 * owner has been idle for ND_SEQ_IDLE_J jiffies; then it takes the entry over, writing the
 * owner's state back to the owner's table entry first and starting from its own table
 * state. The state thus always has one home. Races between CPUs on one flow (two segments
 * of one flow checked at once, or a takeover racing with the owner's update) can miss a
 * count or make a later check start afresh; they never invent one for in-order traffic.
 * Two flows share state only if their 64-bit hashes agree in the index and tag bits (44
 * bits).
 */
static __always_inline __u32 seq_check(__u32 *high, __u8 *valid, const struct nd_pkt *p)
{
	__u32 end = p->seq + p->payload;
	__u32 r = 0;

	if (!*valid) {
		*high = end;
		*valid = 1;
		return 0;
	}
	if ((__s32)(p->seq - *high) < 0)
		r = p->segs;
	if ((__s32)(end - *high) > 0)
		*high = end;
	return r;
}

/* The sequence check when the shared entry `e` (NULL: none) is not this flow's: take the
 * entry over if it is free or idle, else use the table's state. Returns the segments to
 * count as seen before. */
static __noinline int nd_seq_slow(const struct nd_pkt *p, struct nd_seq_slot *e)
{
	if (!p)
		return 0;
	__u64 now = nd_now_ns();
	__u32 tag = (p->hash >> 32) | 1;
	__u32 high = 0, r;
	__u8 valid = 0;

	if (!e || (e->state && p->now_j - e->last_j <= ND_SEQ_IDLE_J)) {
		/* Busy with another flow: this flow's state stays in its table entry. */
		struct nd_flow_stats *fs = table_get(&p->key, now);

		if (!fs)
			return 0;
		high = fs->seq_high;
		valid = fs->seq_valid;
		r = seq_check(&high, &valid, p);
		fs->seq_high = high;
		fs->seq_valid = valid;
		return r;
	}
	__u64 st = e->state;

	if (st) {
		/* Hand over: the idle owner's state goes back to its table entry. */
		struct nd_flow_key owner = e->key;
		struct nd_flow_stats *ofs = bpf_map_lookup_elem(&flows, &owner);

		if (ofs) {
			ofs->seq_high = (__u32)st;
			ofs->seq_valid = 1;
		}
	}
	struct nd_flow_stats *fs = table_get(&p->key, now);

	if (fs) {
		high = fs->seq_high;
		valid = fs->seq_valid;
	}
	r = seq_check(&high, &valid, p);
	e->key = p->key;
	e->last_j = p->now_j;
	e->state = (__u64)tag << 32 | high;
	return r;
}

#endif /* NETDOCTOR_FLOW_SEQ_H */
