// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The packet data plane: per-interface and per-flow accounting on any interface.
 *
 * One accounting routine serves three hooks: tc ingress and egress (the default) and XDP
 * ingress (opt-in). Whatever arrives, every program lets it through untouched: XDP_PASS,
 * and TCX_NEXT on tc so programs attached after ours (Cilium, firewalls) still decide.
 * Unparseable packets are counted as truncated, never dropped.
 *
 * Every packet goes one way: find the interface's counters, parse into a struct nd_pkt
 * (the flow key and what the flow record needs) while counting the interface counters,
 * then flow_record(). Plain TCP and UDP (no VLAN tag, IPv4 options or IPv6 extension
 * headers, not a fragment, not a SYN), most packets of a busy link or tunnel underlay,
 * take fast_account(), inline and straight into the key. Everything else takes
 * nd_slow_skb()/nd_slow_xdp(): global functions calling the general parser's stages (network
 * layer, transport layer), which the verifier checks once each, on their own, instead of
 * once per path through everything before them: VLAN stacks x IPv4 options x IPv6
 * extension headers x TCP options would otherwise multiply past its one-million-instruction
 * limit. Stages hand each other plain scalars (offsets, addresses) in small structs; each
 * re-derives packet pointers from its own context with a bounds check.
 *
 * Kernels this must load on (5.10 and later; the kernel lane boots 5.10, 6.1 and 6.12):
 * - global functions take only their context and scalars (pointer arguments need 5.12,
 *   and before 6.2 such a pointer is refused as a map key); the slow path's stages pass
 *   their results through a per-CPU scratch entry (struct nd_scratch);
 * - the flow record's out-of-line helpers (nd_seq_slow, nd_flow_miss, nd_flow_touch) are
 *   static subprograms, which every kernel verifies with the caller's precise pointer types;
 * - helpers some kernels lack are chosen with CO-RE (include/compat.h), and the XDP
 *   program's multi-buffer flag is set by the agent only where the kernel accepts it.
 */
#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "parse.h"
#include "encap.h"
#include "compat.h"

/* tcx's "continue with the next program"; legacy cls_bpf reads -1 as TC_ACT_UNSPEC, which
 * also means "no verdict from me". Either way we never terminate the chain. */
#define ND_TC_PASS -1

/* Enough linear bytes for Ethernet + VLANs + IPv6 + TCP with options, or a full ICMPv6
 * packet-too-big quote; tc pulls this much when a driver left headers in fragments. */
#define ND_PULL_LEN 160

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02

/* Upper bounds (IP length) of the first ND_SIZE_BUCKETS - 1 size buckets; the last bucket
 * takes the rest. The agent owns the values and sets them before load. */
const volatile __u32 size_bounds[ND_SIZE_BUCKETS - 1] = {};

/* Non-zero: every packet goes through the stages, never fast_account(). For the test that
 * proves both parse alike; the verifier drops the branch not taken, so it costs nothing. */
const volatile __u32 stages_only = 0;

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

/* Per-CPU LRU lists: no global lock on the insert path, and old flows age out by
 * themselves when the table is full. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
	__uint(max_entries, ND_MAX_FLOWS);
	__type(key, struct nd_flow_key);
	__type(value, struct nd_flow_stats);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ND_MAX_PTB);
	__type(key, struct nd_ptb_key);
	__type(value, struct nd_ptb_stats);
} ptb_events SEC(".maps");

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
	__u8 pad;
};

/* Transport headers start at most this far into a packet we parse (6 IPv6 extension
 * headers can be long); farther ones are counted as truncated. Bounding the offset lets
 * the verifier accept `data + offset`. */
#define ND_MAX_L4_OFF 0x3fff

_Static_assert(ND_SIZE_BUCKETS == 10, "size_bucket searches nine bounds");

/* The first bucket whose bound is >= len, by binary search over the sorted bounds: three
 * or four comparisons where a walk from the smallest made up to nine for full-size
 * segments. */
static __always_inline __u32 size_bucket(__u32 len)
{
	if (len <= size_bounds[4]) {
		if (len <= size_bounds[1])
			return len <= size_bounds[0] ? 0 : 1;
		if (len <= size_bounds[2])
			return 2;
		return len <= size_bounds[3] ? 3 : 4;
	}
	if (len <= size_bounds[6])
		return len <= size_bounds[5] ? 5 : 6;
	if (len <= size_bounds[7])
		return 7;
	return len <= size_bounds[8] ? 8 : 9;
}

/* The IP length to account for a network header `l3_off` bytes into the frame whose length
 * field says `field` (0 for none) and whose headers take `hdr_len`. Lengths come from the
 * headers and the frame size: the IP length field lies for GSO super-packets above 64 KiB
 * (BIG TCP writes 0) and Ethernet padding inflates the frame size of tiny packets, so the
 * smaller of the two when both are sane. */
static __always_inline __u32 ip_len_of(const struct nd_meta *m, __u32 l3_off, __u32 field,
				       __u32 hdr_len)
{
	__u32 frame_l3 = m->len > l3_off ? m->len - l3_off : 0;

	return (field >= hdr_len && field < frame_l3) ? field : frame_l3;
}

/* Fills `out` from a parsed network header; `l4` is where the transport header starts. */
static __always_inline void l3_finish(void *data, void *l4, const struct nd_meta *m,
				      const struct l3_info *l3, struct nd_l3 *out)
{
	if (l3->family == 4) {
		struct iphdr *ip = l3->hdr;

		copy_addr(out->saddr, &ip->saddr, 4);
		copy_addr(out->daddr, &ip->daddr, 4);
	} else {
		struct ipv6hdr *ip6 = l3->hdr;

		copy_addr(out->saddr, &ip6->saddr, 16);
		copy_addr(out->daddr, &ip6->daddr, 16);
	}
	out->ip_len = ip_len_of(m, l3->hdr - data, l3->ip_len, l3->hdr_len);
	out->l4_off = l4 - data;
	out->hdr_len = l3->hdr_len;
	out->family = l3->family;
	out->proto = l3->proto;
	out->frag = l3->frag;
	out->df = l3->df;
	out->status = ND_OK;
}

static __always_inline void l3_parse(void *data, void *data_end, const struct nd_meta *m,
				     struct nd_l3 *out)
{
	struct cursor c = { data, data_end };
	struct l3_info l3 = {};
	int ret = -1;

	if (m->link == ND_LINK_RAWIP) {
		__u8 *first = c.pos;

		if ((void *)(first + 1) > c.end) {
			out->status = ND_TRUNCATED;
			return;
		}
		if ((*first >> 4) == 4)
			ret = parse_ipv4(&c, &l3);
		else if ((*first >> 4) == 6)
			ret = parse_ipv6(&c, &l3);
		else {
			out->status = ND_NON_IP;
			return;
		}
	} else {
		__be16 proto = 0;

		if (parse_eth(&c, &proto) == 0) {
			if (proto == bpf_htons(ETH_P_IP))
				ret = parse_ipv4(&c, &l3);
			else if (proto == bpf_htons(ETH_P_IPV6))
				ret = parse_ipv6(&c, &l3);
			else {
				out->status = ND_NON_IP;
				return;
			}
		}
	}
	if (ret < 0) {
		out->status = ND_TRUNCATED;
		return;
	}

	l3_finish(data, c.pos, m, &l3, out);
}

/* MSS option of a SYN; 0 when absent. MSS is conventionally the first option, so a short
 * walk finds it. */
static __always_inline __u16 tcp_syn_mss(struct tcphdr *th, void *end)
{
	__u8 *opt = (void *)(th + 1);
	__u8 *opt_end = (void *)th + th->doff * 4;

	for (int i = 0; i < 10; i++) {
		if ((void *)(opt + 4) > end || opt + 4 > opt_end)
			return 0;
		__u8 kind = opt[0];

		if (kind == 0)
			return 0;
		if (kind == 1) {
			opt++;
			continue;
		}
		__u8 len = opt[1];

		if (kind == 2 && len == 4)
			return (__u16)opt[2] << 8 | opt[3];
		if (len < 2)
			return 0;
		opt += len;
	}
	return 0;
}

/* Records an ICMP frag-needed / ICMPv6 packet-too-big: who sent it, the MTU it announces and
 * the flow it quotes. `quote` points at the quoted IP header. */
static __always_inline void record_ptb(const struct nd_meta *m, const struct nd_l3 *l3,
				       void *quote, void *data_end, __u32 mtu)
{
	struct nd_ptb_key key = {};
	struct cursor c = { quote, data_end };
	struct l3_info inner = {};

	key.ifindex = m->ifindex;
	key.dir = m->dir;
	key.family = l3->family;
	__builtin_memcpy(key.from, l3->saddr, 16);
	if (l3->family == 4) {
		/* The quote may be cut anywhere; record what we have. */
		if (parse_ipv4(&c, &inner) == 0) {
			struct iphdr *ip = inner.hdr;

			copy_addr(key.inner_saddr, &ip->saddr, 4);
			copy_addr(key.inner_daddr, &ip->daddr, 4);
		}
	} else {
		struct ipv6hdr *ip6 = c.pos;

		/* Quoted extension headers are not walked: ports stay 0 for such quotes. */
		if ((void *)(ip6 + 1) <= c.end) {
			copy_addr(key.inner_saddr, &ip6->saddr, 16);
			copy_addr(key.inner_daddr, &ip6->daddr, 16);
			inner.proto = ip6->nexthdr;
			c.pos = ip6 + 1;
		}
	}
	key.inner_proto = inner.proto;
	if (inner.proto == IPPROTO_TCP || inner.proto == IPPROTO_UDP) {
		__be16 *ports = c.pos;

		if ((void *)(ports + 2) <= c.end) {
			key.inner_sport = bpf_ntohs(ports[0]);
			key.inner_dport = bpf_ntohs(ports[1]);
		}
	}

	struct nd_ptb_stats *st = bpf_map_lookup_elem(&ptb_events, &key);

	if (!st) {
		struct nd_ptb_stats init = {};

		bpf_map_update_elem(&ptb_events, &key, &init, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&ptb_events, &key);
		if (!st)
			return;
	}
	__sync_fetch_and_add(&st->count, 1);
	st->mtu = mtu;
	st->last_ns = nd_now_ns();
}

/* The fixed TCP header's facts; `l4_len` is the IP payload length. */
static __always_inline void tcp_fields(struct tcphdr *th, __u32 l4_len, struct nd_l4 *l4)
{
	l4->is_tcp = 1;
	l4->sport = bpf_ntohs(th->source);
	l4->dport = bpf_ntohs(th->dest);
	l4->hdr_len = th->doff * 4;
	l4->seq = bpf_ntohl(th->seq);
	l4->tcp_flags = ((__u8 *)th)[13];
	l4->payload = l4_len > l4->hdr_len ? l4_len - l4->hdr_len : 0;
}

/* The UDP header's facts and the encapsulation its payload carries; `l4_len` is the IP
 * payload length. */
static __always_inline void udp_fields(struct udphdr *uh, void *end, __u32 l4_len,
				       struct nd_l4 *l4)
{
	int wg;

	l4->sport = bpf_ntohs(uh->source);
	l4->dport = bpf_ntohs(uh->dest);
	l4->hdr_len = sizeof(*uh);
	l4->payload = l4_len > sizeof(*uh) ? l4_len - sizeof(*uh) : 0;
	l4->encap = classify_udp(l4->sport, l4->dport, (__u8 *)(uh + 1), end, l4->payload, &wg);
	l4->wg_msg = wg;
}

static __always_inline void l4_parse(void *data, void *data_end, const struct nd_meta *m,
				     const struct nd_l3 *l3, struct nd_l4 *l4)
{
	l4->wg_msg = -1;
	if (l3->frag == ND_FRAG_LATER)
		return; /* no transport header in this fragment */
	__u32 off = l3->l4_off;

	if (off > ND_MAX_L4_OFF) {
		l4->truncated = 1;
		return;
	}
	struct cursor c = { data + off, data_end };
	__u32 l4_len = l3->ip_len > l3->hdr_len ? l3->ip_len - l3->hdr_len : 0;

	if (l3->proto == IPPROTO_TCP) {
		struct tcphdr *th = c.pos;

		if ((void *)(th + 1) > c.end || th->doff < 5) {
			l4->truncated = 1;
			return;
		}
		/* Options cut off by the end of the packet: the fixed header is still usable. */
		if ((void *)th + th->doff * 4 > c.end)
			l4->truncated = 1;
		tcp_fields(th, l4_len, l4);
		if (l4->tcp_flags & TCP_FLAG_SYN)
			l4->syn_mss = tcp_syn_mss(th, c.end);
	} else if (l3->proto == IPPROTO_UDP) {
		struct udphdr *uh = c.pos;

		if ((void *)(uh + 1) > c.end) {
			l4->truncated = 1;
			return;
		}
		udp_fields(uh, c.end, l4_len, l4);
	} else if ((l3->proto == IPPROTO_ICMP && l3->family == 4) ||
		   (l3->proto == IPPROTO_ICMPV6 && l3->family == 6)) {
		/* type, code, checksum, then 4 bytes of type-specific data. */
		__u8 *ic = c.pos;

		if ((void *)(ic + 8) > c.end) {
			l4->truncated = 1;
			return;
		}
		__u8 type = ic[0], code = ic[1];

		l4->sport = (__u16)type << 8 | code;
		l4->hdr_len = 8;
		if (l3->family == 4) {
			if (type == 0 || type == 8) /* echo reply / request: identifier */
				l4->dport = (__u16)ic[4] << 8 | ic[5];
			if (type == 3 && code == 4) {
				l4->icmp_frag_needed = 1;
				record_ptb(m, l3, ic + 8, c.end, (__u32)ic[6] << 8 | ic[7]);
			}
		} else {
			if (type == 128 || type == 129)
				l4->dport = (__u16)ic[4] << 8 | ic[5];
			if (type == 2) {
				l4->icmp6_too_big = 1;
				record_ptb(m, l3, ic + 8, c.end,
					   (__u32)ic[4] << 24 | (__u32)ic[5] << 16 |
						   (__u32)ic[6] << 8 | ic[7]);
			}
		}
	}
}


/*
 * Flow records.
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
 * - The agent reads the table and the slots and adds them up (agent/src/flow_cache.rs);
 *   the slots' sequence lock tells it when a retirement raced with its read.
 */

/* Jiffies without a packet after which a slot may be given to another flow. */
#define ND_SLOT_IDLE_J 4
/* Jiffies without a data segment after which a sequence entry may be handed over. */
#define ND_SEQ_IDLE_J 4
/* A cached flow looks its table entry up once in this many jiffies (LRU recency). */
#define ND_TOUCH_J 256

/* CPU c owns slots [c * ND_FLOW_CACHE_SLOTS, (c + 1) * ND_FLOW_CACHE_SLOTS); the agent
 * sets max_entries to (possible CPUs) x ND_FLOW_CACHE_SLOTS before load (a CPU without
 * slots would count in the table). A plain array partitioned by CPU rather than a per-CPU
 * array because BPF_F_MMAPABLE makes it start on a page, so every 128-byte slot is two
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

/* TCP sequence state shared by all CPUs (see nd_seq_slow); mappable for the page alignment
 * only: one cache line per entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ND_SEQ_SLOTS);
	__type(key, __u32);
	__type(value, struct nd_seq_slot);
} flow_seq SEC(".maps");

_Static_assert(sizeof(struct nd_flow_slot) == 128, "a slot is two cache lines");
_Static_assert(sizeof(struct nd_seq_slot) == 64, "a sequence entry is one cache line");
_Static_assert(sizeof(struct nd_flow_key) == 44, "flow_hash and key_eq read 5 + 1 words");
_Static_assert(__builtin_offsetof(struct nd_flow_slot, last_j) == 44, "a hit stays in the first line");

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
	__u32 pad0;
	__u64 hash;     /* flow_hash(&key) */
	__u16 syn_mss;
	__u8 tcp_flags;
	__u8 encap;
	__u8 is_tcp;
	__s8 wg_msg;
	__u8 pad[2];
} __attribute__((aligned(8)));

/* The key as five 64-bit words and the ports' 32-bit word. */
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
	struct nd_flow_stats init = {};

	init.first_ns = now;
	init.last_ns = now;
	bpf_map_update_elem(&flows, key, &init, BPF_NOEXIST);
	return bpf_map_lookup_elem(&flows, key);
}

static __always_inline void note_max_seg(__u16 *max_seg, __u32 seg_len)
{
	if (seg_len > *max_seg)
		*max_seg = seg_len > 0xffff ? 0xffff : seg_len;
}

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
}

/* Adds a retired slot's counts to its flow's table entry (recreating an evicted one). */
static __always_inline void table_merge(const struct nd_flow_slot *old)
{
	struct nd_flow_stats *fs = bpf_map_lookup_elem(&flows, &old->key);

	if (!fs) {
		struct nd_flow_stats init = {};

		init.packets = old->packets;
		init.segs = old->segs;
		init.bytes = old->bytes;
		init.first_ns = old->first_ns;
		init.last_ns = old->last_ns;
		init.retrans_segs = old->retrans_segs;
		__builtin_memcpy(init.wg_msgs, old->wg_msgs, sizeof(init.wg_msgs));
		init.max_seg = old->max_seg;
		init.tcp_flags = old->tcp_flags;
		init.encap = old->encap;
		if (bpf_map_update_elem(&flows, &old->key, &init, BPF_NOEXIST) == 0)
			return;
		fs = bpf_map_lookup_elem(&flows, &old->key); /* another CPU created it meanwhile */
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
}

/* A packet whose flow is not in its cache slot `s` (NULL: no slot for this CPU), or, with
 * `flush`, whose slot is its own but would wrap its 32-bit byte count: the slot is then
 * retired (its counts added to the table) and taken afresh for the same flow. */
static __noinline int nd_flow_miss(struct nd_flow_slot *s, const struct nd_pkt *p, __u32 retrans,
			    __u32 flush)
{
	if (!p)
		return 0;
	if (!s || (!flush && s->used && p->now_j - s->last_j <= ND_SLOT_IDLE_J)) {
		table_add(p, retrans);
		return 0;
	}
	struct nd_flow_slot old = *s;
	__u64 now = nd_now_ns();
	__u32 gen = old.gen_end + 1;

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
	s->max_seg = p->seg_len > 0xffff ? 0xffff : p->seg_len;
	s->tcp_flags = p->is_tcp ? p->tcp_flags : 0;
	s->encap = p->encap;
	s->used = 1;
	barrier();
	s->gen_begin = gen;

	if (old.used)
		table_merge(&old);
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

/* The flow record of a packet whose nd_pkt is filled in but for now_j and hash. Inlined:
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

	__u32 idx = bpf_get_smp_processor_id() * ND_FLOW_CACHE_SLOTS +
		    (__u32)(h & (ND_FLOW_CACHE_SLOTS - 1));
	struct nd_flow_slot *s = bpf_map_lookup_elem(&flow_cache, &idx);

	/* An empty slot's key is all zeros and a packet's carries the non-zero ifindex of a
	 * watched interface, so a matching key alone says the slot holds this flow: no need to
	 * read `used`, in the slot's second cache line. */
	if (unlikely(!s || !key_eq(&s->key, &p->key))) {
		nd_flow_miss(s, p, retrans, 0);
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
	if (p->wg_msg >= 0 && p->wg_msg < ND_WG_MSG_TYPES)
		s->wg_msgs[p->wg_msg]++;
	if (p->syn_mss)
		nd_flow_touch(s, p);
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

/* The flow record's input from the stages' results; `segs` as account() counted them. */
static __always_inline void fill_pkt(struct nd_pkt *p, const struct nd_meta *m,
				     const struct nd_l3 *l3, const struct nd_l4 *l4, __u32 segs,
				     __u32 seg_len)
{
	__builtin_memset(p, 0, sizeof(*p));
	p->key.ifindex = m->ifindex;
	p->key.dir = m->dir;
	p->key.proto = l3->proto;
	p->key.family = l3->family;
	p->key.sport = l4->sport;
	p->key.dport = l4->dport;
	__builtin_memcpy(p->key.saddr, l3->saddr, 16);
	__builtin_memcpy(p->key.daddr, l3->daddr, 16);
	p->len = m->len;
	p->segs = segs;
	p->seg_len = seg_len;
	p->encap = l4->encap;
	p->wg_msg = l4->wg_msg;
	if (l4->is_tcp) {
		p->is_tcp = 1;
		p->tcp_flags = l4->tcp_flags;
		p->syn_mss = l4->syn_mss;
		p->seq = l4->seq;
		p->payload = l4->payload;
	}
}

/* Interface counters from the stages' results. Returns 1 and fills `p` when the packet
 * gets a flow record (an IP packet whose network header parsed). */
static __always_inline int account(struct nd_iface_dir *ifs, const struct nd_meta *m,
				   const struct nd_l3 *l3, const struct nd_l4 *l4,
				   struct nd_pkt *p)
{
	struct nd_dir_stats *ds = &ifs->s;

	count_packet(ifs, m);
	if (l3->status == ND_NON_IP) {
		ds->non_ip++;
		return 0;
	}
	if (l3->status != ND_OK) {
		ds->truncated++;
		return 0;
	}
	if (l4->truncated)
		ds->truncated++;
	if (l4->icmp_frag_needed)
		ds->icmp_frag_needed++;
	if (l4->icmp6_too_big)
		ds->icmp6_too_big++;

	__u32 seg_len;
	__u32 segs = count_segments(ifs, m, l3->ip_len, l3->hdr_len + l4->hdr_len, l4->is_tcp,
				    l4->payload, l3->df, &seg_len);

	if (l3->frag == ND_FRAG_FIRST)
		ds->frag_first++;
	else if (l3->frag == ND_FRAG_LATER)
		ds->frag_later++;

	fill_pkt(p, m, l3, l4, segs, seg_len);
	return 1;
}

/*
 * The common case in one pass, inline: TCP or UDP over IPv4 without options or over IPv6
 * without extension headers, straight on Ethernet or raw IP, not a fragment, its transport
 * header (TCP options included) in the linear area, not a SYN (whose MSS option the stages
 * read). Most packets of a busy link or tunnel underlay are that, and for them the stages
 * cost more than the parsing: calls whose returns go through the kernel's return thunk
 * (SRSO mitigation), general walks (VLAN tags, IPv4 options, extension headers, ICMP) whose
 * code TCP's own processing evicts from the instruction cache between two packets, and
 * intermediate results copied from struct to struct. This path parses straight into the
 * flow key and the rest of `p`, and counts the interface counters as the stages and
 * account() would for the same packet (fast_path_agrees_with_stages runs both on the same
 * packets), then returns 1 and leaves the flow record to the caller; for any other packet
 * it counts nothing and returns 0, and the stages take it.
 */
static __always_inline int fast_account(void *data, void *data_end, struct nd_iface_dir *ifs,
					const struct nd_meta *m, struct nd_pkt *p)
{
	void *pos = data;
	__u8 version;

	if (m->link == ND_LINK_ETHER) {
		struct ethhdr *eth = data;

		if ((void *)(eth + 1) > data_end)
			return 0;
		pos = eth + 1;
		if (eth->h_proto == bpf_htons(ETH_P_IP))
			version = 4;
		else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
			version = 6;
		else
			return 0;
	} else {
		if (pos + 1 > data_end)
			return 0;
		version = *(__u8 *)pos >> 4;
	}

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
	__u32 l4_len = ip_len > hdr_len ? ip_len - hdr_len : 0;
	__u32 l4_hdr;
	__u16 sport, dport;

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
					l4_len > l4_hdr ? l4_len - l4_hdr : 0, &wg);
		p->wg_msg = wg;
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
	p->pad0 = 0;
	p->pad[0] = 0;
	p->pad[1] = 0;

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

/* What the stages of the slow path hand each other: the packet's meta and each stage's
 * results. Global functions take only their context and scalars (pointer arguments need
 * Linux 5.12, and kernels before 6.2 refuse such a pointer as a map key), so the stages
 * find their inputs and leave their results here, in this CPU's entry: a program runs to
 * completion on one CPU, and a slow path fills the entry before it calls the stages.
 * The flow record stays in the program (one copy of it per program, and the slow path's
 * stack never adds to the flow record's): the slow path leaves its nd_pkt here too. */
struct nd_scratch {
	struct nd_meta m;
	struct nd_l3 l3;
	struct nd_l4 l4;
	struct nd_pkt p; /* the slow path's result, for the program's flow record */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nd_scratch);
} scratch SEC(".maps");

static __always_inline struct nd_scratch *scratch_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&scratch, &zero);
}

/* The stages, once per context type: global (not static) so the verifier checks each on
 * its own. They read scratch's meta (and l3) and write its l3 (or l4); they return 0. */
#define ND_DEFINE_STAGES(suffix, ctx_type)                                                  \
	__noinline int nd_l3_##suffix(ctx_type *ctx)                                       \
	{                                                                                  \
		struct nd_scratch *sc = scratch_get();                                     \
                                                                                           \
		if (!sc)                                                                   \
			return 0;                                                          \
		l3_parse((void *)(long)ctx->data, (void *)(long)ctx->data_end, &sc->m,     \
			 &sc->l3);                                                         \
		return 0;                                                                  \
	}                                                                                  \
	__noinline int nd_l4_##suffix(ctx_type *ctx)                                       \
	{                                                                                  \
		struct nd_scratch *sc = scratch_get();                                     \
                                                                                           \
		if (!sc)                                                                   \
			return 0;                                                          \
		l4_parse((void *)(long)ctx->data, (void *)(long)ctx->data_end, &sc->m,     \
			 &sc->l3, &sc->l4);                                                \
		return 0;                                                                  \
	}

ND_DEFINE_STAGES(xdp, struct xdp_md)
ND_DEFINE_STAGES(skb, struct __sk_buff)

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

/* The slow path's scratch entry, zeroed but for the meta `m`. */
static __always_inline struct nd_scratch *scratch_start(const struct nd_meta *m)
{
	struct nd_scratch *sc = scratch_get();

	if (!sc)
		return NULL;
	sc->m = *m;
	__builtin_memset(&sc->l3, 0, sizeof(sc->l3));
	__builtin_memset(&sc->l4, 0, sizeof(sc->l4));
	return sc;
}

/* Every packet fast_account() does not take: the stages, then account(). Global, so that
 * its code and stack stay out of the programs' hot path; it takes only the context (see
 * struct nd_scratch) and finds the interface's counters again. Returns 1 when the packet
 * gets a flow record, whose input it left in scratch's nd_pkt. */
__noinline int nd_slow_xdp(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	struct nd_iface_dir *ifs = iface_lookup(ifindex, ND_DIR_INGRESS);
	struct nd_meta m;

	if (!ifs)
		return 0;
	xdp_meta(ctx, ifindex, ifs->link, &m);
	struct nd_scratch *sc = scratch_start(&m);

	if (!sc)
		return 0;
	nd_l3_xdp(ctx);
	if (sc->l3.status == ND_OK)
		nd_l4_xdp(ctx);
	return account(ifs, &m, &sc->l3, &sc->l4, &sc->p);
}

/* Copies the slow path's nd_pkt into `p` when it made one (`made`, its return value). */
static __always_inline int slow_result(int made, struct nd_pkt *p)
{
	struct nd_scratch *sc = made ? scratch_get() : NULL;

	if (!sc)
		return 0;
	__builtin_memcpy(p, &sc->p, sizeof(*p));
	return 1;
}

/* Section "xdp", not "xdp.frags": libbpf would set BPF_F_XDP_HAS_FRAGS, which kernels
 * before 5.18 refuse; the agent sets the flag where the kernel accepts it. */
SEC("xdp")
int nd_xdp_ingress(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	struct nd_iface_dir *ifs = iface_lookup(ifindex, ND_DIR_INGRESS);

	if (!ifs)
		return XDP_PASS; /* not an interface the agent watches */
	struct nd_meta m;
	struct nd_pkt p;

	xdp_meta(ctx, ifindex, ifs->link, &m);
	if ((!stages_only &&
	     fast_account((void *)(long)ctx->data, (void *)(long)ctx->data_end, ifs, &m, &p)) ||
	    slow_result(nd_slow_xdp(ctx), &p))
		flow_record(&p);
	return XDP_PASS;
}

/* The stages on an skb, pulling headers into the linear area when they were cut short. */
static __always_inline void parse_skb_stages(struct __sk_buff *skb, struct nd_scratch *sc)
{
	nd_l3_skb(skb);
	if (sc->l3.status == ND_OK)
		nd_l4_skb(skb);

	/* Headers cut short may only be cut by the linear area (some drivers and tunnels leave
	 * them in paged fragments). Pulling them in changes nothing about the packet, but costs
	 * a copy of the header area (TCP's clones included), so only when parsing needs it. */
	__u32 linear = skb->data_end - skb->data;

	if ((sc->l3.status == ND_TRUNCATED || sc->l4.truncated) && skb->len > linear &&
	    linear < ND_PULL_LEN) {
		bpf_skb_pull_data(skb, skb->len < ND_PULL_LEN ? skb->len : ND_PULL_LEN);
		/* Keeps clang from reusing a ctx offset in a register: the verifier only accepts
		 * ctx field loads at a constant offset from the unmodified ctx pointer. */
		barrier_var(skb);
		__builtin_memset(&sc->l3, 0, sizeof(sc->l3));
		__builtin_memset(&sc->l4, 0, sizeof(sc->l4));
		nd_l3_skb(skb);
		if (sc->l3.status == ND_OK)
			nd_l4_skb(skb);
	}
}

/* The skb counterpart of nd_slow_xdp(). */
__noinline int nd_slow_skb(struct __sk_buff *skb, __u32 dir)
{
	__u32 ifindex = skb->ifindex;
	struct nd_iface_dir *ifs = iface_lookup(ifindex, dir);
	struct nd_meta m;

	if (!ifs)
		return 0;
	skb_meta(skb, ifindex, dir, ifs->link, &m);
	struct nd_scratch *sc = scratch_start(&m);

	if (!sc)
		return 0;
	parse_skb_stages(skb, sc);
	return account(ifs, &m, &sc->l3, &sc->l4, &sc->p);
}

static __always_inline void account_skb(struct __sk_buff *skb, __u32 dir)
{
	__u32 ifindex = skb->ifindex;
	struct nd_iface_dir *ifs = iface_lookup(ifindex, dir);

	if (!ifs)
		return; /* not an interface the agent watches */
	struct nd_meta m;
	struct nd_pkt p;

	skb_meta(skb, ifindex, dir, ifs->link, &m);
	if ((!stages_only &&
	     fast_account((void *)(long)skb->data, (void *)(long)skb->data_end, ifs, &m, &p)) ||
	    slow_result(nd_slow_skb(skb, dir), &p))
		flow_record(&p);
}

SEC("tc")
int nd_tc_ingress(struct __sk_buff *skb)
{
	account_skb(skb, ND_DIR_INGRESS);
	return ND_TC_PASS;
}

SEC("tc")
int nd_tc_egress(struct __sk_buff *skb)
{
	account_skb(skb, ND_DIR_EGRESS);
	return ND_TC_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
