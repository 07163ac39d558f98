/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The WireGuard path, measured passively on an underlay: loss and round trips per peer from
 * what WireGuard puts on the wire in clear, with no keys and no probes.
 *
 * - Loss: every transport-data message carries its receiver index (this host's index of the
 *   session) and a 64-bit counter that grows by one per message the peer sends in the
 *   session (keepalives too). For each (interface, receiver index) the data plane keeps, per
 *   CPU, the highest and lowest counter seen and the messages received; the agent takes the
 *   largest, the smallest and the sum over CPUs. Counters expected in a window are the
 *   advance of the highest; lost = expected - received. A message that arrives late (WireGuard
 *   accepts reordering within its replay window) is counted when it arrives, so reordering
 *   alone is not loss; a message whose counter this CPU saw in its last 64 is a duplicate
 *   and not counted. A GSO packet's segments carry consecutive counters from its first (one
 *   sender's batch; a receiver's GRO may merge runs with gaps, which the next packet's
 *   counter corrects).
 * - Cost: a peer's transport data arrives on one underlay flow (its endpoint to ours) and
 *   carries one session at a time (a new one at each rekey), so the session lives in the
 *   third cache line of that flow's flow cache slot (struct nd_flow_slot: wg_index, wg): a
 *   data message costs no lookup beyond its flow record's, a comparison of the index and
 *   plain updates of this CPU's slot (no atomics). What the slot does not hold is in the
 *   table `wg_rx` (a helper call, several times the cost): a message of another session of
 *   the same flow while the slot's is busy, or one whose flow record went to the flow table
 *   (its slot busy with another flow, or no slot for this CPU). A slot's session idle for
 *   ND_WG_IDLE_J jiffies is retired into the table when another session of the flow needs
 *   the slot (nd_wg_switch(), out of line), and so is the session of a slot retired for
 *   another flow (nd_flow_miss()). The agent adds slots and table up.
 * - Bound: `wg_rx` is an LRU table of ND_WG_SESSIONS sessions (sessions change at every
 *   rekey, at least every two minutes per active peer). When it is full the least recently
 *   used session is evicted; if its messages keep coming it starts again from the next one,
 *   so an eviction can hide loss in the gap, never invent it.
 * - Round trips: `wg_hs` keeps the handshake messages this host sends, by its sender index:
 *   an initiation leaving (the initiator) is answered by a response that carries the same
 *   index as its receiver index; a response leaving (the responder) is confirmed by the first
 *   transport data carrying its index. Each pair is one round trip (plus the peer's
 *   processing), timed with bpf_ktime_get_ns. Handshakes happen at least every two minutes per
 *   active peer, so the agent always has a recent one. An answer that never comes is the
 *   sign of a path that works one way only (wireguard.one_way_path).
 */
#ifndef NETDOCTOR_WG_PATH_H
#define NETDOCTOR_WG_PATH_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "compat.bpf.h"
#include "flow_table.bpf.h"

/* The sessions' table: per CPU, what the flow cache's slots do not hold. One common LRU
 * list: entries are created once per session and CPU, or when a slot's session is retired. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, ND_WG_SESSIONS);
	__type(key, struct nd_wg_key);
	__type(value, struct nd_wg_rx);
} wg_rx SEC(".maps");

/* Where a session's table value is built when it leaves a slot or starts in the table: per
 * CPU (a program runs to completion on its CPU), so that the flow record's out-of-line
 * paths, which already hold a flow's counts, stay within the stack's 512 bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nd_wg_rx);
} wg_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ND_WG_HANDSHAKES);
	__type(key, __u32);
	__type(value, struct nd_wg_hs);
} wg_hs SEC(".maps");

_Static_assert(sizeof(struct nd_wg_rx) == 64, "a session's value is one cache line");
_Static_assert(sizeof(struct nd_flow_slot) == 192, "a flow slot is three cache lines");
_Static_assert(__builtin_offsetof(struct nd_flow_slot, wg_msgs) == 128 &&
		       sizeof(struct nd_flow_slot) - __builtin_offsetof(struct nd_flow_slot,
									 wg_msgs) == 64,
	       "a WireGuard message stays in the slot's third line");

/* A slot's session that sent nothing for this many jiffies may give way to another. */
#define ND_WG_IDLE_J 8

/* Whether the flow record's packet is transport data this underlay receives. */
static __always_inline int wg_rx_data(const struct nd_pkt *p)
{
	return p->wg_msg == ND_WG_DATA && p->wg_ok && p->key.dir == ND_DIR_INGRESS;
}

/* Bits for `n` consecutive counters ending at bit 0. */
static __always_inline __u64 wg_run(__u64 n)
{
	return n >= 64 ? ~0ULL : (1ULL << n) - 1;
}

/* The responder's round trip: the first transport data carrying the index of a response
 * this host sent confirms the session. */
static __always_inline void wg_confirm(__u32 index)
{
	struct nd_wg_hs *h = bpf_map_lookup_elem(&wg_hs, &index);

	if (h && h->role == ND_WG_RESPONDED && !h->done_ns)
		h->done_ns = bpf_ktime_get_ns();
}

/* A session's state after its first message (or GSO packet) on this CPU. */
static __always_inline void wg_first(struct nd_wg_ctr *v, __u32 *last_j, const struct nd_pkt *p)
{
	__u64 n = p->segs ? p->segs : 1;

	v->low = p->wg_ctr;
	v->high = p->wg_ctr + n - 1;
	v->window = wg_run(n);
	v->packets = n;
	v->dups = 0;
	v->last_ns = nd_now_ns();
	*last_j = p->now_j;
}

/* The same for a table value, which also names the peer's endpoint. */
static __always_inline void wg_rx_first(struct nd_wg_rx *v, const struct nd_pkt *p)
{
	__builtin_memset(v, 0, sizeof(*v));
	wg_first(&v->c, &v->last_j, p);
	v->sport = p->key.sport;
	v->family = p->key.family;
	__builtin_memcpy(v->saddr, p->key.saddr, 16);
}

/* Counts a message (or GSO packet) into this CPU's state `e` of its session: see the top
 * of the file. */
static __always_inline void wg_count(struct nd_wg_ctr *e, __u32 *last_j, const struct nd_pkt *p)
{
	__u64 c = p->wg_ctr, n = p->segs ? p->segs : 1, last = c + n - 1, high = e->high;

	if (last > high) {
		__u64 adv = last - high;

		e->window = (adv >= 64 ? 0 : e->window << adv) | wg_run(n);
		e->high = last;
	} else {
		__u64 d = high - c;

		if (n == 1 && d < 64) {
			__u64 bit = 1ULL << d;

			if (e->window & bit) {
				e->dups++;
				return;
			}
			e->window |= bit;
		}
		if (c < e->low)
			e->low = c;
	}
	e->packets += n;
	if (*last_j != p->now_j) {
		*last_j = p->now_j;
		e->last_ns = nd_now_ns();
	}
}

/* Adds a retired slot's state to this CPU's value of its session in the table. */
static __always_inline void wg_table_merge(const struct nd_wg_key *k, const struct nd_wg_rx *old)
{
	struct nd_wg_rx *e = bpf_map_lookup_elem(&wg_rx, k);

	if (!e) {
		if (bpf_map_update_elem(&wg_rx, k, old, BPF_NOEXIST) == 0)
			return;
		e = bpf_map_lookup_elem(&wg_rx, k); /* another CPU created it meanwhile */
		if (!e)
			return;
	}
	if (!e->c.packets) {
		*e = *old;
		return;
	}
	if (old->c.high > e->c.high) {
		e->c.high = old->c.high;
		e->c.window = old->c.window;
	}
	if (old->c.low < e->c.low)
		e->c.low = old->c.low;
	e->c.packets += old->c.packets;
	e->c.dups += old->c.dups;
	if (old->c.last_ns > e->c.last_ns)
		e->c.last_ns = old->c.last_ns;
}

/* This CPU's wg_scratch value. */
static __always_inline struct nd_wg_rx *wg_scratch_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&wg_scratch, &zero);
}

/* A message counted in the table: its flow slot holds another session that is busy, or its
 * flow record went to the flow table. */
static __always_inline void wg_table_count(const struct nd_pkt *p)
{
	struct nd_wg_key k = { .ifindex = p->key.ifindex, .index = p->wg_idx };
	struct nd_wg_rx *e = bpf_map_lookup_elem(&wg_rx, &k);

	if (e && e->c.packets) {
		wg_count(&e->c, &e->last_j, p);
		return;
	}
	if (e) {
		wg_rx_first(e, p); /* the entry exists, this CPU's value is still empty */
		return;
	}
	struct nd_wg_rx *v = wg_scratch_get();

	if (!v)
		return;
	wg_rx_first(v, p);
	wg_table_merge(&k, v);
}

/* The session slot `s` holds, as the table's key `k` and value (this CPU's wg_scratch
 * value, returned; the session's source is the slot's flow: its peer's endpoint); NULL
 * when the slot holds none. */
static __always_inline struct nd_wg_rx *wg_slot_session(const struct nd_flow_slot *s,
							struct nd_wg_key *k)
{
	struct nd_wg_rx *v = s->wg.packets ? wg_scratch_get() : NULL;

	if (!v)
		return NULL;
	k->ifindex = s->key.ifindex;
	k->index = s->wg_index;
	__builtin_memset(v, 0, sizeof(*v));
	v->c = s->wg;
	v->last_j = s->wg_last_j;
	v->sport = s->key.sport;
	v->family = s->key.family;
	__builtin_memcpy(v->saddr, s->key.saddr, 16);
	return v;
}

/* A data message whose flow slot `s` (this flow's) holds no session or another one. A slot
 * with none, or whose session is idle, retires it into the table and takes the message's,
 * under the slot's sequence lock (gen_end, contents, gen_begin: see struct nd_flow_slot); a
 * busy one is left to its session and the message counted in the table. */
static __noinline int nd_wg_switch(struct nd_flow_slot *s, const struct nd_pkt *p)
{
	if (!s || !p)
		return 0;
	if (s->wg.packets && p->now_j - s->wg_last_j <= ND_WG_IDLE_J) {
		wg_table_count(p);
	} else {
		struct nd_wg_key k;
		struct nd_wg_rx *old = wg_slot_session(s, &k);
		__u32 gen = s->gen_end + 1;

		s->gen_end = gen;
		barrier();
		s->wg_index = p->wg_idx;
		wg_first(&s->wg, &s->wg_last_j, p);
		barrier();
		s->gen_begin = gen;
		if (old)
			wg_table_merge(&k, old);
	}
	wg_confirm(p->wg_idx);
	return 0;
}

/* A WireGuard message whose flow record hit its slot `s`: its type's count and, for data
 * received, its session's counters in the same line. */
static __always_inline void wg_slot_msg(struct nd_flow_slot *s, const struct nd_pkt *p)
{
	if (p->wg_msg < ND_WG_MSG_TYPES)
		s->wg_msgs[p->wg_msg]++;
	if (!wg_rx_data(p))
		return;
	if (unlikely(!s->wg.packets || s->wg_index != p->wg_idx)) {
		nd_wg_switch(s, p);
		return;
	}
	wg_count(&s->wg, &s->wg_last_j, p);
}

/* A handshake message: an initiation or response leaving (remembered by its sender index),
 * or a response arriving for one of this host's initiations (its receiver index). */
static __noinline int nd_wg_handshake(const struct nd_pkt *p)
{
	if (!p)
		return 0;
	if (p->key.dir == ND_DIR_EGRESS &&
	    (p->wg_msg == ND_WG_INITIATION || p->wg_msg == ND_WG_RESPONSE)) {
		struct nd_wg_hs v = {};
		__u32 key = p->wg_idx;

		v.sent_ns = bpf_ktime_get_ns();
		v.ifindex = p->key.ifindex;
		v.role = p->wg_msg == ND_WG_INITIATION ? ND_WG_INITIATED : ND_WG_RESPONDED;
		v.family = p->key.family;
		v.dport = p->key.dport;
		__builtin_memcpy(v.daddr, p->key.daddr, 16);
		bpf_map_update_elem(&wg_hs, &key, &v, BPF_ANY);
	} else if (p->key.dir == ND_DIR_INGRESS && p->wg_msg == ND_WG_RESPONSE) {
		__u32 key = (__u32)p->wg_ctr; /* the response's receiver index */
		struct nd_wg_hs *h = bpf_map_lookup_elem(&wg_hs, &key);

		if (h && h->role == ND_WG_INITIATED && !h->done_ns)
			h->done_ns = bpf_ktime_get_ns();
	}
	return 0;
}

/* What a WireGuard handshake message adds to the path's figures, after its flow record
 * (which counted transport data: wg_slot_msg() and nd_flow_miss()). */
static __always_inline void wg_record(const struct nd_pkt *p)
{
	if (!p->wg_ok || p->wg_msg == ND_WG_DATA)
		return;
	nd_wg_handshake(p);
}

#endif /* NETDOCTOR_WG_PATH_H */
