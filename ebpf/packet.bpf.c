// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The packet data plane: per-interface and per-flow accounting on any interface.
 *
 * One accounting routine serves three hooks: tc ingress and egress (the default) and XDP
 * ingress (opt-in). Whatever arrives, every program lets it through untouched: XDP_PASS,
 * and TCX_NEXT on tc so programs attached after ours (Cilium, firewalls) still decide.
 * Unparseable packets are counted as truncated, never dropped.
 *
 * TCP segments of this host's own connections (not SYNs) take the local path first where the
 * agent turned it on (local_tcp.bpf.h): interface counters only, since socket telemetry
 * describes those connections. Every other packet goes one way: find the interface's
 * counters, parse into a struct nd_pkt
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
 * The parts live in headers under include/, one concern each, in the order a packet meets
 * them: meta.bpf.h (what is known of the packet), iface_stats.bpf.h (interface slots and
 * counters), local_tcp.bpf.h (the local path), fast_path.bpf.h, stages.bpf.h (the general parser)
 * with too_big.bpf.h (ICMP too-big records), then the flow record: flow_table.bpf.h, flow_seq.bpf.h
 * (retransmissions) and flow_cache.bpf.h, whose slot also counts a WireGuard transport-data
 * message into its session (loss: wg_path.bpf.h); then, for WireGuard handshakes, the path's
 * round trips (wg_path.bpf.h). The agent counts the table's entries with flow_count.bpf.h's
 * iterator where the kernel keeps the count, and looks active flows up in batches with
 * flow_lookup.bpf.h's program where the kernel runs it. This file holds the settings the
 * agent writes before load, account(), the slow path's scratch entry and global functions,
 * and the entry points.
 *
 * Kernels this must load on (5.10 and later; the kernel lane boots 5.10, 6.1 and 6.12):
 * - global functions take only their context and scalars (pointer arguments need 5.12,
 *   and before 6.2 such a pointer is refused as a map key); the slow path's stages pass
 *   their results through a per-CPU scratch entry (struct nd_scratch);
 * - the flow record's out-of-line helpers (nd_seq_slow, nd_flow_miss, nd_flow_touch) are
 *   static subprograms, which every kernel verifies with the caller's precise pointer types;
 * - helpers some kernels lack are chosen with CO-RE (include/compat.bpf.h), and the XDP
 *   program's multi-buffer flag is set by the agent only where the kernel accepts it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "packet.h"

/* tcx's "continue with the next program"; legacy cls_bpf reads -1 as TC_ACT_UNSPEC, which
 * also means "no verdict from me". Either way we never terminate the chain. */
#define ND_TC_PASS -1

/* Enough linear bytes for Ethernet + VLANs + IPv6 + TCP with options, or a full ICMPv6
 * packet-too-big quote; tc pulls this much when a driver left headers in fragments. */
#define ND_PULL_LEN 160

/* The size buckets' bounds (packet.h), published for the agent's check (limits.rs): the
 * programs compare with the constants themselves and never read this. */
const volatile __u32 size_bounds[ND_SIZE_BUCKETS - 1] = {
	ND_SIZE_BOUND_0, ND_SIZE_BOUND_1, ND_SIZE_BOUND_2, ND_SIZE_BOUND_3, ND_SIZE_BOUND_4,
	ND_SIZE_BOUND_5, ND_SIZE_BOUND_6, ND_SIZE_BOUND_7, ND_SIZE_BOUND_8,
};

/* enum nd_path's bits, published for the agent's check (limits.rs) like size_bounds. */
const volatile __u8 path_bits[5] = { ND_PATH_LOCAL_TCP, ND_PATH_STAGES, ND_PATH_USER_PORTS,
				     ND_PATH_LOCAL_IN4, ND_PATH_LOCAL_IN6 };


/* The data plane's parts (see above). */
#include "meta.bpf.h"
#include "iface_stats.bpf.h"
#include "flow_table.bpf.h"
#include "stages.bpf.h"
#include "fast_path.bpf.h"
#include "flow_cache.bpf.h"
#include "local_tcp.bpf.h"
#include "wg_path.bpf.h"
#include "flow_count.bpf.h"
#include "flow_lookup.bpf.h"

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
	p->wg_ok = l4->wg_ok;
	p->wg_idx = l4->wg_idx;
	p->wg_ctr = l4->wg_ctr;
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
	if ((!(ifs->path & ND_PATH_STAGES) &&
	     fast_account((void *)(long)ctx->data, (void *)(long)ctx->data_end, ifs, &m, &p)) ||
	    slow_result(nd_slow_xdp(ctx), &p)) {
		flow_record(&p);
		if (unlikely(p.wg_msg >= 0))
			wg_record(&p);
	}
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
	if ((ifs->path & ND_PATH_LOCAL_TCP) && local_tcp_account(skb, ifs, ifindex, dir))
		return;
	struct nd_meta m;
	struct nd_pkt p;

	skb_meta(skb, ifindex, dir, ifs->link, &m);
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	if ((!(ifs->path & ND_PATH_STAGES) && fast_account(data, data_end, ifs, &m, &p)) ||
	    slow_result(nd_slow_skb(skb, dir), &p)) {
		flow_record(&p);
		if (unlikely(p.wg_msg >= 0))
			wg_record(&p);
	}
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
