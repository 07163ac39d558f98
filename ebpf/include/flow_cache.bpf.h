/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The flow record: the per-CPU flow cache in front of the flow table, and flow_record(),
 * what every IP packet ends with.
 *
 * A flow's figures live in two places whose sum is the flow's total: the `flows` LRU table
 * and a per-CPU cache of recently seen flows in front of it. Looking a 44-byte key up in
 * the table (hashing, bucket walk, LRU bookkeeping, atomic adds on an entry other CPUs
 * also write) was most of the data plane's cost; a cache hit is an array lookup, a key
 * comparison and plain additions to memory only this CPU writes.
 *
 * - Cache slot: the index comes from a hash of the key (XDP has no skb->hash, and a
 *   flow's skb->hash can change, e.g. when TCP rethinks its txhash); each CPU has its own
 *   ND_FLOW_CACHE_SLOTS slots. A slot holds the key and what the flow carried on this CPU
 *   since the CPU took the slot for it.
 * - Miss: a slot idle for ND_SLOT_IDLE_J jiffies (or empty) is retired - its counts are
 *   added to the flow's table entry - and taken for the new flow. A slot still busy with
 *   another flow is left alone and the packet is counted in the table directly, as without
 *   the cache: two flows that collide cost what the table costs, never a retirement per
 *   packet.
 * - The table entry of a cached flow exists from the moment a slot takes it (first seen,
 *   the SYN's MSS, the entry count) and is looked up every ND_TOUCH_J jiffies, so the LRU
 *   does not evict busy flows whose packets all hit the cache.
 * - Time: a slot reads the (coarse, tick-granular) clock only when jiffies moved since its
 *   last packet.
 * - WireGuard: a slot's third line holds the flow's WireGuard message counts and, for an
 *   underlay flow received, the session its transport data carries (wg_path.bpf.h), so a
 *   data message costs this lookup only; non-WireGuard packets never touch that line.
 * - The agent reads the table and the slots and adds them up
 *   (agent/src/kernel/packet/flow_cache.rs); the slots' sequence lock tells it when a
 *   retirement raced with its read.
 */
#ifndef NETDOCTOR_FLOW_CACHE_H
#define NETDOCTOR_FLOW_CACHE_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "compat.bpf.h"
#include "flow_table.bpf.h"
#include "flow_seq.bpf.h"
#include "wg_path.bpf.h"

/* Jiffies without a packet after which a slot may be given to another flow. */
#define ND_SLOT_IDLE_J 4
/* A cached flow looks its table entry up once in this many jiffies (LRU recency). */
#define ND_TOUCH_J 256

/* CPU c owns slots [c * ND_FLOW_CACHE_SLOTS, (c + 1) * ND_FLOW_CACHE_SLOTS); the agent
 * sets max_entries to (possible CPUs) x ND_FLOW_CACHE_SLOTS before load (a CPU without
 * slots would count in the table). A plain array partitioned by CPU rather than a per-CPU
 * array because BPF_F_MMAPABLE makes it start on a page, so every 192-byte slot is three
 * whole cache lines (array values otherwise start 56 bytes into a line; per-CPU values
 * are 8-byte aligned), and lets the agent map it and read every slot without a system
 * call. Only the owning CPU writes a slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ND_FLOW_CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct nd_flow_slot);
} flow_cache SEC(".maps");

_Static_assert(__builtin_offsetof(struct nd_flow_slot, last_j) == 44, "a hit stays in the first line");

/* A slot's counts as a table value (`v`), before the slot is retired. */
static __always_inline void slot_counts(const struct nd_flow_slot *s, struct nd_flow_stats *v)
{
	__builtin_memset(v, 0, sizeof(*v));
	v->packets = s->packets;
	v->segs = s->segs;
	v->bytes = s->bytes;
	v->first_ns = s->first_ns;
	v->last_ns = s->last_ns;
	v->retrans_segs = s->retrans_segs;
	__builtin_memcpy(v->wg_msgs, s->wg_msgs, sizeof(v->wg_msgs));
	v->max_seg = s->max_seg;
	v->tcp_flags = s->tcp_flags;
	v->encap = s->encap;
}

/* Adds a retired slot's counts (slot_counts()), counted in the agent's window `window`, to
 * its flow's table entry (recreating an evicted one). `old` is the caller's to change. */
static __always_inline void table_merge(const struct nd_flow_key *key,
					struct nd_flow_stats *old, __u32 window)
{
	struct nd_flow_stats *fs = bpf_map_lookup_elem(&flows, key);

	if (!fs) {
		win_init(old, window);
		if (table_insert(key, old) == 0) {
			if (window)
				active_push(key, window);
			return;
		}
		__builtin_memset(old->win, 0, sizeof(old->win));
		fs = bpf_map_lookup_elem(&flows, key); /* another CPU created it meanwhile */
		if (!fs)
			return;
	}
	__sync_fetch_and_add(&fs->packets, old->packets);
	__sync_fetch_and_add(&fs->segs, old->segs);
	__sync_fetch_and_add(&fs->bytes, old->bytes);
	if (old->retrans_segs)
		__sync_fetch_and_add(&fs->retrans_segs, old->retrans_segs);
#pragma unroll
	for (int i = 0; i < ND_WG_MSG_TYPES; i++) {
		if (old->wg_msgs[i])
			__sync_fetch_and_add(&fs->wg_msgs[i], old->wg_msgs[i]);
	}
	if (old->first_ns < fs->first_ns)
		fs->first_ns = old->first_ns;
	if (old->last_ns > fs->last_ns)
		fs->last_ns = old->last_ns;
	note_max_seg(&fs->max_seg, old->max_seg);
	fs->tcp_flags |= old->tcp_flags;
	if (old->encap)
		fs->encap = old->encap;
	win_merge(key, fs, window, old);
}

/* Whether the agent's window moved on since the slot's counts began. */
static __always_inline int slot_window_moved(const struct nd_flow_slot *s)
{
	__u32 n = window_now();

	return n && s->window != n;
}

/* A packet whose flow is not in its cache slot `s` (NULL: no slot for this CPU), or, with
 * `flush`, whose slot is its own but would wrap its 32-bit byte count or holds an earlier
 * window of the agent's: the slot is then retired (its counts added to the table) and
 * taken afresh for the same flow. */
static __noinline int nd_flow_miss(struct nd_flow_slot *s, const struct nd_pkt *p, __u32 retrans,
			    __u32 flush)
{
	if (!p)
		return 0;
	int wg_data = wg_rx_data(p);

	if (!s || (!flush && s->used && p->now_j - s->last_j <= ND_SLOT_IDLE_J)) {
		table_add(p, retrans);
		if (wg_data) {
			wg_table_count(p);
			wg_confirm(p->wg_idx);
		}
		return 0;
	}
	/* What the slot held: the flow's counts and its session's, for the tables below. */
	struct nd_flow_stats *old = value_room(ND_ROOM_RETIRED);

	if (!old) /* never: the array has this entry on every CPU */
		return 0;
	struct nd_flow_key old_key = s->key;
	struct nd_wg_key wk;
	__u32 old_used = s->used;
	__u32 old_window = s->window;
	struct nd_wg_rx *wv = wg_slot_session(s, &wk);
	__u64 now = nd_now_ns();
	__u32 gen = s->gen_end + 1;

	slot_counts(s, old);

	/* Retire and take the slot under its sequence lock: gen_end, contents, gen_begin. The
	 * old counts reach the table only after (the locked adds below are ordered after these
	 * stores on x86), so a reader that still sees the old generation in the slot cannot
	 * have seen them in the table too. On weakly ordered CPUs (arm64), where BPF's atomic
	 * adds are not barriers, one read racing with a retirement could count it twice. */
	s->gen_end = gen;
	barrier();
	s->key = p->key;
	s->packets = 1;
	s->bytes = p->len;
	s->segs = p->segs;
	s->first_ns = now;
	s->last_ns = now;
	s->last_j = p->now_j;
	s->touch_j = p->now_j;
	s->retrans_segs = retrans;
	__builtin_memset(s->wg_msgs, 0, sizeof(s->wg_msgs));
	if (p->wg_msg >= 0 && p->wg_msg < ND_WG_MSG_TYPES)
		s->wg_msgs[p->wg_msg] = 1;
	if (wg_data) {
		s->wg_index = p->wg_idx;
		wg_first(&s->wg, &s->wg_last_j, p);
	} else {
		s->wg.packets = 0;
	}
	s->max_seg = p->seg_len > 0xffff ? 0xffff : p->seg_len;
	s->tcp_flags = p->is_tcp ? p->tcp_flags : 0;
	s->encap = p->encap;
	s->used = 1;
	s->window = window_now();
	barrier();
	s->gen_begin = gen;

	if (old_used)
		table_merge(&old_key, old, old_window);
	if (wv)
		wg_table_merge(&wk, wv);
	if (wg_data)
		wg_confirm(p->wg_idx);
	/* The new flow's table entry: first seen, the SYN's MSS, the table's entry count. */
	struct nd_flow_stats *fs = table_get(&p->key, now);

	if (fs && p->syn_mss)
		fs->syn_mss = p->syn_mss;
	return 0;
}

/* A cache hit that needs the table entry: a SYN's MSS (the last SYN's is kept, in one
 * place), or the periodic lookup that keeps a busy cached flow young in the LRU. */
static __noinline int nd_flow_touch(struct nd_flow_slot *s, const struct nd_pkt *p)
{
	if (!s || !p)
		return 0;
	s->touch_j = p->now_j;
	/* An entry the LRU evicted anyway comes back with the slot's first sighting. */
	struct nd_flow_stats *fs = table_get(&p->key, s->first_ns);

	if (fs && p->syn_mss)
		fs->syn_mss = p->syn_mss;
	return 0;
}

/* The flow record of a packet whose nd_pkt is filled in but for now_j, cpu and hash. Inlined:
 * the hit path is short, and a global function's call and return cost more than verifying
 * it once per caller. */
static __always_inline void flow_record(struct nd_pkt *p)
{
	p->now_j = bpf_jiffies64(); /* inlined by the verifier: a load */
	__u64 h = flow_hash(&p->key);

	p->hash = h;

	__u32 retrans = 0;

	if (p->payload) {
		__u32 sidx = (h >> 16) & (ND_SEQ_SLOTS - 1);
		__u32 tag = (h >> 32) | 1;
		struct nd_seq_slot *e = bpf_map_lookup_elem(&flow_seq, &sidx);

		if (e && (e->state >> 32) == tag) {
			__u32 high = (__u32)e->state;
			__u32 end = p->seq + p->payload;

			if ((__s32)(p->seq - high) < 0)
				retrans = p->segs;
			if ((__s32)(end - high) > 0)
				e->state = (__u64)tag << 32 | end;
			if (e->last_j != p->now_j)
				e->last_j = p->now_j;
		} else {
			retrans = nd_seq_slow(p, e);
		}
	}

	p->cpu = bpf_get_smp_processor_id();
	__u32 idx = p->cpu * ND_FLOW_CACHE_SLOTS + (__u32)(h & (ND_FLOW_CACHE_SLOTS - 1));
	struct nd_flow_slot *s = bpf_map_lookup_elem(&flow_cache, &idx);

	/* An empty slot's key is all zeros and a packet's carries the non-zero ifindex of a
	 * watched interface, so a matching key alone says the slot holds this flow: no need to
	 * read `used`, in the slot's second cache line. */
	if (unlikely(!s || !key_eq(&s->key, &p->key))) {
		nd_flow_miss(s, p, retrans, 0);
		return;
	}
	/* The first packet of a tick checks the agent's window: a slot holds one window's counts
	 * (flow_window.bpf.h), so a later window's first packet flushes the earlier's. */
	if (unlikely(s->last_j != p->now_j) && slot_window_moved(s)) {
		nd_flow_miss(s, p, retrans, 1);
		return;
	}
	/* Hit: only this CPU writes the slot, so plain additions are exact. Counts are 32-bit
	 * to keep a hit in one cache line; packets and segments never exceed bytes, so a slot
	 * whose bytes would wrap is flushed to the table first. */
	__u32 bytes = s->bytes + p->len;

	if (unlikely(bytes < p->len)) {
		nd_flow_miss(s, p, retrans, 1);
		return;
	}
	s->bytes = bytes;
	s->packets++;
	s->segs += p->segs;
	note_max_seg(&s->max_seg, p->seg_len);
	s->tcp_flags |= p->tcp_flags;
	if (p->encap)
		s->encap = p->encap;
	if (s->last_j != p->now_j) {
		/* Once a tick: the clock, and the table entry's LRU age. */
		s->last_j = p->now_j;
		s->last_ns = nd_now_ns();
		if (p->now_j - s->touch_j > ND_TOUCH_J && !p->syn_mss)
			nd_flow_touch(s, p);
	}
	if (retrans)
		s->retrans_segs += retrans;
	if (unlikely(p->wg_msg >= 0))
		wg_slot_msg(s, p);
	if (p->syn_mss)
		nd_flow_touch(s, p);
}

#endif /* NETDOCTOR_FLOW_CACHE_H */
