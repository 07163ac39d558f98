/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The WireGuard path, measured passively on an underlay: loss and round trips per peer from
 * what WireGuard puts on the wire in clear, with no keys and no probes.
 *
 * - Loss: every transport-data message carries its receiver index (this host's index of the
 *   session) and a 64-bit counter that grows by one per message the peer sends in the
 *   session (keepalives too). For each (interface, receiver index) `wg_rx` keeps, per CPU,
 *   the highest and lowest counter seen and the messages received; the agent takes the
 *   largest, the smallest and the sum over CPUs. Counters expected in a window are the
 *   advance of the highest; lost = expected - received. A message that arrives late (WireGuard
 *   accepts reordering within its replay window) is counted when it arrives, so reordering
 *   alone is not loss; a message whose counter this CPU saw in its last 64 is a duplicate
 *   and not counted. A GSO packet's segments carry consecutive counters from its first (one
 *   sender's batch; a receiver's GRO may merge runs with gaps, which the next packet's
 *   counter corrects).
 * - Cost: a transport-data message received costs one lookup, in a per-CPU session cache
 *   (`wg_cache`, an array: the lookup is inlined), and plain updates of this CPU's slot (the
 *   key, counters and window in one cache line, no atomics). A session's state is its
 *   slots' plus what the table `wg_rx` holds of it: a message whose slot is busy with another
 *   session is counted there (a helper call, several times the cost), and a slot idle for
 *   ND_WG_IDLE_J jiffies is retired into it when another session needs the slot
 *   (nd_wg_miss(), out of line). The agent adds slots and table up.
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

/* The sessions' table: per CPU, what the cache (below) does not hold. One common LRU list:
 * entries are created once per session and CPU, or when a cache slot is retired. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, ND_WG_SESSIONS);
	__type(key, struct nd_wg_key);
	__type(value, struct nd_wg_rx);
} wg_rx SEC(".maps");

/* The session cache: CPU c owns slots [c * ND_WG_CACHE_SLOTS, (c + 1) * ND_WG_CACHE_SLOTS);
 * the agent sets max_entries to (possible CPUs) x ND_WG_CACHE_SLOTS before load. A plain
 * array partitioned by CPU, like the flow cache (flow_cache.bpf.h): its lookup is inlined and
 * every slot starts on a cache line, where a lookup in `wg_rx` is a helper call that costs
 * several times the rest of the accounting. Only the owning CPU writes a slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ND_WG_CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct nd_wg_slot);
} wg_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ND_WG_HANDSHAKES);
	__type(key, __u32);
	__type(value, struct nd_wg_hs);
} wg_hs SEC(".maps");

_Static_assert(sizeof(struct nd_wg_rx) == 64, "a session's value is one cache line");
_Static_assert(sizeof(struct nd_wg_slot) == 128, "a slot is two cache lines");
_Static_assert(__builtin_offsetof(struct nd_wg_slot, rx.last_j) < 64,
	       "a message stays in the slot's first line");

/* A slot whose session sent nothing for this many jiffies may be given to another. */
#define ND_WG_IDLE_J 8

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
static __always_inline void wg_first(struct nd_wg_rx *v, const struct nd_pkt *p)
{
	__u64 n = p->segs ? p->segs : 1;

	__builtin_memset(v, 0, sizeof(*v));
	v->low = p->wg_ctr;
	v->high = p->wg_ctr + n - 1;
	v->window = wg_run(n);
	v->packets = n;
	v->last_j = p->now_j;
	v->last_ns = nd_now_ns();
	v->sport = p->key.sport;
	v->family = p->key.family;
	__builtin_memcpy(v->saddr, p->key.saddr, 16);
}

/* Counts a message (or GSO packet) into this CPU's state `e` of its session: see the top
 * of the file. */
static __always_inline void wg_count(struct nd_wg_rx *e, const struct nd_pkt *p)
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
	if (e->last_j != p->now_j) {
		e->last_j = p->now_j;
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
	if (!e->packets) {
		*e = *old;
		return;
	}
	if (old->high > e->high) {
		e->high = old->high;
		e->window = old->window;
	}
	if (old->low < e->low)
		e->low = old->low;
	e->packets += old->packets;
	e->dups += old->dups;
	if (old->last_ns > e->last_ns)
		e->last_ns = old->last_ns;
}

/* A message counted in the table: its cache slot is busy with another session, or this CPU
 * has no slots. */
static __always_inline void wg_table_count(const struct nd_wg_key *k, const struct nd_pkt *p)
{
	struct nd_wg_rx *e = bpf_map_lookup_elem(&wg_rx, k);

	if (e && e->packets) {
		wg_count(e, p);
		return;
	}
	struct nd_wg_rx v;

	wg_first(&v, p);
	if (e)
		*e = v; /* the entry exists, this CPU's value is still empty */
	else
		wg_table_merge(k, &v);
}

/* A message whose session is not in its cache slot `s` (NULL: this CPU has none). A slot
 * that is empty or idle is retired (its state added to the table) and taken, under its
 * sequence lock (gen_end, contents, gen_begin, as flow_cache.bpf.h's); a busy one is left to
 * its session and the message counted in the table. */
static __noinline int nd_wg_miss(struct nd_wg_slot *s, const struct nd_pkt *p)
{
	if (!p)
		return 0;
	struct nd_wg_key k = { .ifindex = p->key.ifindex, .index = p->wg_idx };

	if (!s || (s->key.ifindex && p->now_j - s->rx.last_j <= ND_WG_IDLE_J)) {
		wg_table_count(&k, p);
	} else {
		struct nd_wg_key old_key = s->key;
		struct nd_wg_rx old = s->rx;
		__u32 gen = s->gen_end + 1;

		s->gen_end = gen;
		barrier();
		s->key = k;
		wg_first(&s->rx, p);
		barrier();
		s->gen_begin = gen;
		if (old_key.ifindex)
			wg_table_merge(&old_key, &old);
	}
	wg_confirm(p->wg_idx);
	return 0;
}

/* A transport-data message (or a GSO packet of them) received: one inlined array lookup, a
 * key comparison and plain updates of this CPU's slot on a hit. */
static __always_inline void wg_rx_data(const struct nd_pkt *p)
{
	__u32 h = ((p->wg_idx ^ (p->key.ifindex << 16)) * 0x9e3779b9u) >> 24;
	__u32 i = p->cpu * ND_WG_CACHE_SLOTS + (h & (ND_WG_CACHE_SLOTS - 1));
	struct nd_wg_slot *s = bpf_map_lookup_elem(&wg_cache, &i);

	/* An empty slot's ifindex is 0, a packet's that of a watched interface. */
	if (unlikely(!s || s->key.index != p->wg_idx || s->key.ifindex != p->key.ifindex)) {
		nd_wg_miss(s, p);
		return;
	}
	wg_count(&s->rx, p);
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

/* What a WireGuard message adds to the path's figures, after its flow record. */
static __always_inline void wg_record(const struct nd_pkt *p)
{
	if (!p->wg_ok)
		return;
	if (p->wg_msg == ND_WG_DATA) {
		if (p->key.dir == ND_DIR_INGRESS)
			wg_rx_data(p);
		return;
	}
	nd_wg_handshake(p);
}

#endif /* NETDOCTOR_WG_PATH_H */
