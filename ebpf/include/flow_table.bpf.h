/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The flow table, `flows`: every flow's figures, one LRU hash entry per flow, and what the
 * flow record knows of a packet (struct nd_pkt).
 *
 * A flow's figures are this table's entry plus what the per-CPU flow cache (flow_cache.bpf.h)
 * holds of it; a packet reaches the table directly only when its cache slot is busy with
 * another flow (or its CPU has no slots), and a slot's counts reach it when the slot is
 * retired. The key is hashed and
 * compared as 64-bit words (flow_hash, key_eq): a flow key is 44 bytes, and the cache and
 * the sequence table (flow_seq.bpf.h) index themselves by that hash.
 */
#ifndef NETDOCTOR_FLOW_TABLE_H
#define NETDOCTOR_FLOW_TABLE_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "compat.bpf.h"
#include "flow_window.bpf.h"

/* Per-CPU LRU lists: no global lock on the insert path, and old flows age out by
 * themselves when the table is full. ND_MAX_FLOWS is the size this object declares; the
 * agent sets the size it was given (--max-flows) before load. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
	__uint(max_entries, ND_MAX_FLOWS);
	__type(key, struct nd_flow_key);
	__type(value, struct nd_flow_stats);
} flows SEC(".maps");

/* Entries this CPU created in `flows` (successful inserts). Nothing but the LRU removes an
 * entry (the agent never deletes), so inserts minus the entries the table holds are the
 * flows the LRU evicted: exact, and paid only by a packet that creates an entry, which
 * costs hundreds of ns anyway. Per CPU, so inserts never share a counter's cache line. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} flow_inserts SEC(".maps");

/* Where a value is built before it is written to `flows`: two of them (152 bytes each) do
 * not fit beside the flow record's other locals in BPF's 512-byte stack. Per CPU: [0] a new
 * entry (table_get), [1] a retired cache slot's counts (nd_flow_miss). */
enum { ND_ROOM_NEW = 0, ND_ROOM_RETIRED = 1 };
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct nd_flow_stats);
} flow_scratch SEC(".maps");

static __always_inline struct nd_flow_stats *value_room(__u32 which)
{
	return bpf_map_lookup_elem(&flow_scratch, &which);
}

/* Creates the flow's entry (BPF_NOEXIST) and counts the insert; returns the update's
 * result (non-zero when another CPU created it first). */
static __always_inline long table_insert(const struct nd_flow_key *key,
					 const struct nd_flow_stats *init)
{
	long err = bpf_map_update_elem(&flows, key, init, BPF_NOEXIST);

	if (err == 0) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&flow_inserts, &zero);

		/* Atomic although per CPU: a program in task context can be preempted (RT) by
		 * another on the same CPU, and a lost count would invent an eviction. */
		if (n)
			__sync_fetch_and_add(n, 1);
	}
	return err;
}

_Static_assert(sizeof(struct nd_flow_key) == 44, "flow_hash and key_eq read 5 + 1 words");

/* What the flow record needs of one packet; its helpers take it by pointer. The key
 * comes first and 8-byte aligned so that hashing and comparing it take 64-bit words. */
struct nd_pkt {
	union {
		struct nd_flow_key key;
		/* The same bytes as words, for writing the key the way it is read: a load that
		 * spans several smaller stores cannot be forwarded from the store buffer and waits
		 * for them to reach the cache. */
		struct {
			__u64 w[5];
			__u32 ports;
		} kw;
	};
	__u32 len;
	__u32 segs;
	__u32 seg_len;
	__u32 seq;
	__u32 payload;
	__u32 now_j;    /* jiffies, low 32 bits */
	__u32 cpu;      /* this CPU (flow_record reads it for the flow cache) */
	__u64 hash;     /* flow_hash(&key) */
	__u16 syn_mss;
	__u8 tcp_flags;
	__u8 encap;
	__u8 is_tcp;
	__s8 wg_msg;
	__u8 wg_ok;     /* WireGuard: wg_idx and wg_ctr were read (see wg_fields) */
	__u8 pad;
	__u32 wg_idx;   /* WireGuard: the index at offset 4 (receiver's in transport data) */
	__u32 pad1;
	__u64 wg_ctr;   /* WireGuard: the counter of transport data */
} __attribute__((aligned(8)));

/* The key as five 64-bit words and the ports' 32-bit word. */
#define KW64(k, i) (((const __u64 *)(k))[i])
#define KW_PORTS(k) (((const __u32 *)(k))[10])

/* 64-bit hash of a flow key: the six words multiplied by independent odd constants and
 * summed (the multiplications run in parallel, not as a chain), then mixed so that every
 * input bit reaches the low bits. The slot index takes the low bits, the sequence table's
 * index bits 16-27 and its tag the high 32. Not a keyed hash: flows colliding in the cache
 * cost the table's price and are never conflated (slots compare the whole key); for the
 * sequence table's 44-bit identity see nd_seq_slow(). */
static __always_inline __u64 flow_hash(const struct nd_flow_key *k)
{
	__u64 h = KW64(k, 0) * 0x9e3779b97f4a7c15ULL + KW64(k, 1) * 0xff51afd7ed558ccdULL +
		  KW64(k, 2) * 0xc4ceb9fe1a85ec53ULL + KW64(k, 3) * 0xd6e8feb86659fd93ULL +
		  KW64(k, 4) * 0xa0761d6478bd642fULL + (__u64)KW_PORTS(k) * 0xe7037ed1a0b428dbULL;

	h ^= h >> 32;
	h *= 0x8ebc6af09c88c6e3ULL;
	h ^= h >> 29;
	return h;
}

static __always_inline int key_eq(const struct nd_flow_key *a, const struct nd_flow_key *b)
{
	return ((KW64(a, 0) ^ KW64(b, 0)) | (KW64(a, 1) ^ KW64(b, 1)) | (KW64(a, 2) ^ KW64(b, 2)) |
		(KW64(a, 3) ^ KW64(b, 3)) | (KW64(a, 4) ^ KW64(b, 4)) |
		(__u64)(KW_PORTS(a) ^ KW_PORTS(b))) == 0;
}

/* The flow's table entry, created if missing (first seen now). */
static __always_inline struct nd_flow_stats *table_get(const struct nd_flow_key *key, __u64 now)
{
	struct nd_flow_stats *fs = bpf_map_lookup_elem(&flows, key);

	if (fs)
		return fs;
	struct nd_flow_stats *init = value_room(ND_ROOM_NEW);

	if (!init)
		return NULL;
	__builtin_memset(init, 0, sizeof(*init));
	init->first_ns = now;
	init->last_ns = now;
	table_insert(key, init);
	return bpf_map_lookup_elem(&flows, key);
}

static __always_inline void note_max_seg(__u16 *max_seg, __u32 seg_len)
{
	if (seg_len > *max_seg)
		*max_seg = seg_len > 0xffff ? 0xffff : seg_len;
}

/* Counts a packet in the flow's table entry: the path without the cache. */
static __always_inline void table_add(const struct nd_pkt *p, __u32 retrans)
{
	__u64 now = nd_now_ns();
	struct nd_flow_stats *fs = table_get(&p->key, now);

	if (!fs)
		return;
	__sync_fetch_and_add(&fs->packets, 1);
	__sync_fetch_and_add(&fs->segs, p->segs);
	__sync_fetch_and_add(&fs->bytes, p->len);
	if (retrans)
		__sync_fetch_and_add(&fs->retrans_segs, retrans);
	fs->last_ns = now;
	note_max_seg(&fs->max_seg, p->seg_len);
	if (p->encap)
		fs->encap = p->encap;
	if (p->wg_msg >= 0 && p->wg_msg < ND_WG_MSG_TYPES)
		__sync_fetch_and_add(&fs->wg_msgs[p->wg_msg], 1);
	if (p->is_tcp) {
		fs->tcp_flags |= p->tcp_flags;
		if (p->syn_mss)
			fs->syn_mss = p->syn_mss;
	}
	struct nd_flow_win *w = win_of(&p->key, fs, window_now());

	if (w) {
		__sync_fetch_and_add(&w->packets, 1);
		__sync_fetch_and_add(&w->segs, p->segs);
		__sync_fetch_and_add(&w->bytes, p->len);
		if (retrans)
			__sync_fetch_and_add(&w->retrans_segs, retrans);
		if (p->wg_msg >= 0 && p->wg_msg < ND_WG_MSG_TYPES)
			__sync_fetch_and_add(&w->wg_msgs[p->wg_msg], 1);
	}
}

#endif /* NETDOCTOR_FLOW_TABLE_H */
