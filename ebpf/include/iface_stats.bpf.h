/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Interface counters: where a packet finds its interface's counters (the interface slots),
 * and what every packet adds to them.
 *
 * Every packet goes through here first (one of an interface the agent does not watch stops
 * here), so finding the counters is built for the hot path: one array load from the
 * ifindex and the CPU number when the interface owns slot ifindex % ND_MAX_IFACES (the
 * agent gives it that slot when it is free), and only otherwise a lookup of its slot in
 * `iface_slot` (struct nd_iface_dir in packet.h says why).
 *
 * size_bucket() compares with the bounds of packet.h (ND_SIZE_BOUND_*).
 */
#ifndef NETDOCTOR_IFACE_STATS_H
#define NETDOCTOR_IFACE_STATS_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "meta.bpf.h"

/* ifindex -> slot + 1 (0: not watched), for interfaces that do not own slot
 * ifindex % ND_MAX_IFACES. An array lookup is a few instructions; a hash lookup costs
 * ~100 ns on this path. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ND_SLOT_ARRAY_IFINDEX);
	__type(key, __u32);
	__type(value, __u32);
} iface_slot SEC(".maps");

/* The same for the rare ifindex >= ND_SLOT_ARRAY_IFINDEX (namespaces with heavy churn). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ND_MAX_IFACES);
	__type(key, __u32);
	__type(value, __u32);
} iface_slot_big SEC(".maps");

/* Interface counters (struct nd_iface_dir). A plain array partitioned by CPU rather than a
 * per-CPU array: a per-CPU lookup loads the value's address from the map before loading
 * the value, two dependent cache misses under load instead of one, and BPF_F_MMAPABLE
 * starts the values on a page, so each 256-byte value keeps its hot lines together. The
 * agent sets max_entries to (possible CPUs) x ND_MAX_IFACES x 2 before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ND_MAX_IFACES * 2);
	__type(key, __u32);
	__type(value, struct nd_iface_dir);
} iface_stats SEC(".maps");

_Static_assert(sizeof(struct nd_iface_dir) == 256, "an interface direction is four cache lines");
_Static_assert(__builtin_offsetof(struct nd_iface_dir, s.size_hist) == 64,
	       "what every packet counts fills the first line, the size histogram the second");

/* Slot + 1 of a large ifindex (0: not watched). A function of its own so that the array
 * lookup in nd_iface_slot keeps a constant map: the verifier inlines an array lookup into a
 * few instructions only when a call site always sees the same map. One call site for both
 * maps (which is what clang makes of `cond ? lookup(&a, k) : lookup(&b, k)`) is a real
 * helper call dispatched through the map's ops, an indirect call (a retpoline here). */
static __noinline __u32 iface_slot_big_of(__u32 ifindex)
{
	__u32 *slot = bpf_map_lookup_elem(&iface_slot_big, &ifindex);

	return slot ? *slot : 0;
}

/* Slot + 1 of an interface that does not own slot ifindex % ND_MAX_IFACES (0: not
 * watched). Global, so the rare path's code stays out of the programs' hot path. */
__noinline __u32 nd_iface_slot(__u32 ifindex)
{
	if (ifindex >= ND_SLOT_ARRAY_IFINDEX)
		return iface_slot_big_of(ifindex);
	__u32 *slot = bpf_map_lookup_elem(&iface_slot, &ifindex);

	return slot ? *slot : 0;
}

static __always_inline __u32 iface_index(__u32 slot, __u32 dir)
{
	return (bpf_get_smp_processor_id() * ND_MAX_IFACES + slot) * 2 + (dir & 1);
}

/* This CPU's counters of interface `ifindex` in direction `dir`, or NULL when the interface
 * is not watched. */
static __always_inline struct nd_iface_dir *iface_lookup(__u32 ifindex, __u32 dir)
{
	__u32 idx = iface_index(ifindex & (ND_MAX_IFACES - 1), dir);
	struct nd_iface_dir *d = bpf_map_lookup_elem(&iface_stats, &idx);

	if (d && d->ifindex == ifindex && ifindex)
		return d;
	__u32 slot = nd_iface_slot(ifindex);

	if (!slot || !ifindex)
		return NULL;
	idx = iface_index((slot - 1) & (ND_MAX_IFACES - 1), dir);
	d = bpf_map_lookup_elem(&iface_stats, &idx);
	return d && d->ifindex == ifindex ? d : NULL;
}

_Static_assert(ND_SIZE_BUCKETS == 10, "size_bucket counts nine bounds");
_Static_assert(ND_SIZE_BOUND_0 < ND_SIZE_BOUND_1 && ND_SIZE_BOUND_1 < ND_SIZE_BOUND_2 &&
		       ND_SIZE_BOUND_2 < ND_SIZE_BOUND_3 && ND_SIZE_BOUND_3 < ND_SIZE_BOUND_4 &&
		       ND_SIZE_BOUND_4 < ND_SIZE_BOUND_5 && ND_SIZE_BOUND_5 < ND_SIZE_BOUND_6 &&
		       ND_SIZE_BOUND_6 < ND_SIZE_BOUND_7 && ND_SIZE_BOUND_7 < ND_SIZE_BOUND_8,
	       "size_bucket counts the bounds below a length: they must be sorted");

/* 1 when len > bound, without a branch: both are below 2^32, so the 64-bit difference is
 * negative exactly then. The empty asm hides the difference's origin from clang, which
 * otherwise turns the shift back into a comparison and a branch. */
static __always_inline __u32 nd_above(__u32 len, __u64 bound)
{
	__u64 d = bound - len;

	asm volatile("" : "+r"(d));
	return d >> 63;
}

/* The number of bounds below len, as straight-line arithmetic rather than a search, whose
 * branches clang placed far apart (jumps of ~250 instructions), so a packet's path through
 * it spread over more lines of code. */
static __always_inline __u32 size_bucket_sum(__u32 len)
{
	return nd_above(len, ND_SIZE_BOUND_0) + nd_above(len, ND_SIZE_BOUND_1) +
	       nd_above(len, ND_SIZE_BOUND_2) + nd_above(len, ND_SIZE_BOUND_3) +
	       nd_above(len, ND_SIZE_BOUND_4) + nd_above(len, ND_SIZE_BOUND_5) +
	       nd_above(len, ND_SIZE_BOUND_6) + nd_above(len, ND_SIZE_BOUND_7) +
	       nd_above(len, ND_SIZE_BOUND_8);
}

/* Lengths 1291-1500, where most segments lie (full-size ones, through a tunnel or not), and
 * bounds 2-7 too, all multiples of ten: within ten bytes 1291+10k..1300+10k a length has the
 * same bounds below it, those <= 1290+10k. Their count for each k, three bits each, makes
 * one 63-bit constant (ND_BK_TABLE), computed here from the bounds. */
#define ND_BK_LO 1291
#define ND_BK_TENS 21
#define ND_BK_LE(b, k) ((b) <= 1290 + 10 * (k))
#define ND_BK_AT(k)                                                                           \
	((__u64)(ND_BK_LE(ND_SIZE_BOUND_2, k) + ND_BK_LE(ND_SIZE_BOUND_3, k) +                \
		 ND_BK_LE(ND_SIZE_BOUND_4, k) + ND_BK_LE(ND_SIZE_BOUND_5, k) +                \
		 ND_BK_LE(ND_SIZE_BOUND_6, k) + ND_BK_LE(ND_SIZE_BOUND_7, k))                 \
	 << (3 * (k)))
#define ND_BK_TABLE                                                                           \
	(ND_BK_AT(0) | ND_BK_AT(1) | ND_BK_AT(2) | ND_BK_AT(3) | ND_BK_AT(4) | ND_BK_AT(5) |    \
	 ND_BK_AT(6) | ND_BK_AT(7) | ND_BK_AT(8) | ND_BK_AT(9) | ND_BK_AT(10) | ND_BK_AT(11) |  \
	 ND_BK_AT(12) | ND_BK_AT(13) | ND_BK_AT(14) | ND_BK_AT(15) | ND_BK_AT(16) |             \
	 ND_BK_AT(17) | ND_BK_AT(18) | ND_BK_AT(19) | ND_BK_AT(20))
_Static_assert(ND_SIZE_BOUND_1 < ND_BK_LO && ND_SIZE_BOUND_8 >= ND_BK_LO + 10 * ND_BK_TENS - 1,
	       "bounds 0 and 1 lie below the table's lengths, bound 8 at or above them");
_Static_assert(ND_SIZE_BOUND_2 % 10 == 0 && ND_SIZE_BOUND_3 % 10 == 0 &&
		       ND_SIZE_BOUND_4 % 10 == 0 && ND_SIZE_BOUND_5 % 10 == 0 &&
		       ND_SIZE_BOUND_6 % 10 == 0 && ND_SIZE_BOUND_7 % 10 == 0,
	       "the table works in tens: bounds 2-7 must be multiples of ten");

/* The first bucket whose bound is >= len: the number of bounds below len. For full-size
 * lengths a shift of one constant (~8 instructions), else the sum (~36); BPF_PROG_TEST_RUN
 * tests hold both to the bounds (tests/tests/lab/dataplane_test_run/tcp_sizes.rs). */
static __always_inline __u32 size_bucket(__u32 len)
{
	__u32 off = len - ND_BK_LO;

	/* off / 10 as a multiplication, exact below 1029: clang leaves BPF a division, which
	 * the x86 JIT makes a div instruction of ~20 cycles. */
	if (off < 10 * ND_BK_TENS)
		return 2 + ((ND_BK_TABLE >> ((off * 205 >> 11) * 3)) & 7);
	return size_bucket_sum(len);
}

/* Counts a packet in the interface's packet, segment and byte counts. Per-CPU value: plain
 * increments are exact. */
static __always_inline void count_packet(struct nd_iface_dir *ifs, const struct nd_meta *m)
{
	struct nd_dir_stats *ds = &ifs->s;

	ds->packets++;
	ds->segs += m->gso_segs;
	ds->bytes += m->len;
	if (m->gso_segs > 1)
		ds->gso_packets++;
}

/* Counts a packet's wire segments by size: the size histogram and DF segments over the MTU
 * (and, for generic XDP, the segments GRO merged). `hdrs` is the length of the
 * network and transport headers, `payload` the transport payload of the whole packet.
 * Returns the segments, and in *seg_len the IP length of one: GSO packets are cut into
 * gso_size payloads. */
static __always_inline __u32 count_segments(struct nd_iface_dir *ifs, const struct nd_meta *m,
					    __u32 ip_len, __u32 hdrs, __u8 is_tcp, __u32 payload,
					    __u8 df, __u32 *seg_len)
{
	struct nd_dir_stats *ds = &ifs->s;
	__u32 segs = m->gso_segs;
	__u32 len = ip_len;

	if (segs > 1 && m->gso_size)
		len = hdrs + m->gso_size;
	/* Generic XDP runs after GRO and gets no GSO metadata: a TCP "frame" larger than the
	 * MTU is an aggregate of MTU-sized segments, not an oversized packet. */
	if (m->xdp && is_tcp && len > ifs->mtu && ifs->mtu > hdrs) {
		__u32 mss = ifs->mtu - hdrs;

		segs = (payload + mss - 1) / mss;
		if (!segs)
			segs = 1;
		len = ifs->mtu;
		ds->segs += segs - 1;
	}
	__u32 bucket = size_bucket(len);

	if (bucket < ND_SIZE_BUCKETS)
		ds->size_hist[bucket] += segs;
	if (df && len > ifs->mtu)
		ds->df_over_mtu += segs;
	*seg_len = len;
	return segs;
}

#endif /* NETDOCTOR_IFACE_STATS_H */
