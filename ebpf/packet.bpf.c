// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The packet data plane: per-interface and per-flow accounting on any interface.
 *
 * One accounting routine serves three hooks: tc ingress and egress (the default) and XDP
 * ingress (opt-in). Whatever arrives, every program lets it through untouched: XDP_PASS,
 * and TCX_NEXT on tc so programs attached after ours (Cilium, firewalls) still decide.
 * Unparseable packets are counted as truncated, never dropped.
 *
 * The work is split into global functions (network layer, transport layer, flow record).
 * The verifier checks each global function once, on its own, instead of once per path
 * through everything before it: VLAN stacks x IPv4 options x IPv6 extension headers x
 * TCP options would otherwise multiply past its one-million-instruction limit. Stages
 * hand each other plain scalars (offsets, addresses) in small structs; each re-derives
 * packet pointers from its own context with a bounds check.
 */
#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "netdoctor.h"
#include "parse.h"
#include "encap.h"

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

/* ifindex -> slot + 1 (0: not watched). An array lookup is a few instructions; a hash
 * lookup costs ~100 ns on this path. */
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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ND_MAX_IFACES);
	__type(key, __u32);
	__type(value, struct nd_iface_stats);
} iface_stats SEC(".maps");

/* Counters of a watched interface, or NULL. */
static __always_inline struct nd_iface_stats *iface_lookup(__u32 ifindex)
{
	__u32 *slot = ifindex < ND_SLOT_ARRAY_IFINDEX ? bpf_map_lookup_elem(&iface_slot, &ifindex)
						      : bpf_map_lookup_elem(&iface_slot_big, &ifindex);

	if (!slot || !*slot)
		return NULL;
	__u32 idx = *slot - 1;

	return bpf_map_lookup_elem(&iface_stats, &idx);
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

static __always_inline __u32 size_bucket(__u32 len)
{
#pragma unroll
	for (int i = 0; i < ND_SIZE_BUCKETS - 1; i++) {
		if (len <= size_bounds[i])
			return i;
	}
	return ND_SIZE_BUCKETS - 1;
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

	if (l3.family == 4) {
		struct iphdr *ip = l3.hdr;

		copy_addr(out->saddr, &ip->saddr, 4);
		copy_addr(out->daddr, &ip->daddr, 4);
	} else {
		struct ipv6hdr *ip6 = l3.hdr;

		copy_addr(out->saddr, &ip6->saddr, 16);
		copy_addr(out->daddr, &ip6->daddr, 16);
	}
	/* Lengths from the headers' offsets and the frame size: the IP length field lies for
	 * GSO super-packets above 64 KiB (BIG TCP writes 0) and Ethernet padding inflates the
	 * frame size of tiny packets, so take the smaller of the two when both are sane. */
	__u32 l3_off = l3.hdr - data;
	__u32 frame_l3 = m->len > l3_off ? m->len - l3_off : 0;

	out->ip_len = (l3.ip_len >= l3.hdr_len && l3.ip_len < frame_l3) ? l3.ip_len : frame_l3;
	out->l4_off = c.pos - data;
	out->hdr_len = l3.hdr_len;
	out->family = l3.family;
	out->proto = l3.proto;
	out->frag = l3.frag;
	out->df = l3.df;
	out->status = ND_OK;
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
	st->last_ns = bpf_ktime_get_coarse_ns();
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
		l4->is_tcp = 1;
		l4->sport = bpf_ntohs(th->source);
		l4->dport = bpf_ntohs(th->dest);
		l4->hdr_len = th->doff * 4;
		l4->seq = bpf_ntohl(th->seq);
		l4->tcp_flags = ((__u8 *)th)[13];
		l4->payload = l4_len > l4->hdr_len ? l4_len - l4->hdr_len : 0;
		if (l4->tcp_flags & TCP_FLAG_SYN)
			l4->syn_mss = tcp_syn_mss(th, c.end);
	} else if (l3->proto == IPPROTO_UDP) {
		struct udphdr *uh = c.pos;

		if ((void *)(uh + 1) > c.end) {
			l4->truncated = 1;
			return;
		}
		l4->sport = bpf_ntohs(uh->source);
		l4->dport = bpf_ntohs(uh->dest);
		l4->hdr_len = sizeof(*uh);
		l4->payload = l4_len > sizeof(*uh) ? l4_len - sizeof(*uh) : 0;
		int wg;

		l4->encap = classify_udp(l4->sport, l4->dport, (__u8 *)(uh + 1), c.end,
					 l4->payload, &wg);
		l4->wg_msg = wg;
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

/* The stages, once per context type: global (not static) so the verifier checks each on
 * its own. They return 0; results travel in `out`. */
#define ND_DEFINE_STAGES(suffix, ctx_type)                                                  \
	__noinline int nd_l3_##suffix(ctx_type *ctx, const struct nd_meta *m,              \
				      struct nd_l3 *out)                                   \
	{                                                                                  \
		if (!ctx || !m || !out)                                                    \
			return 0;                                                          \
		l3_parse((void *)(long)ctx->data, (void *)(long)ctx->data_end, m, out);    \
		return 0;                                                                  \
	}                                                                                  \
	__noinline int nd_l4_##suffix(ctx_type *ctx, const struct nd_meta *m,              \
				      const struct nd_l3 *l3, struct nd_l4 *out)           \
	{                                                                                  \
		if (!ctx || !m || !l3 || !out)                                             \
			return 0;                                                          \
		l4_parse((void *)(long)ctx->data, (void *)(long)ctx->data_end, m, l3, out); \
		return 0;                                                                  \
	}

ND_DEFINE_STAGES(xdp, struct xdp_md)
ND_DEFINE_STAGES(skb, struct __sk_buff)

/* Passive retransmission detection from sequence numbers: data starting before the highest
 * sequence already seen was sent before (or arrived out of order). Works on traffic a
 * gateway only forwards, where no socket exists to ask. Races between CPUs on one flow can
 * miss a count; they never invent one for in-order traffic. */
static __always_inline void track_seq(struct nd_flow_stats *fs, const struct nd_l4 *l4,
				      __u32 segs)
{
	if (!l4->payload)
		return;
	__u32 end = l4->seq + l4->payload;

	if (!fs->seq_valid) {
		fs->seq_high = end;
		fs->seq_valid = 1;
		return;
	}
	if ((__s32)(l4->seq - fs->seq_high) < 0)
		__sync_fetch_and_add(&fs->retrans_segs, segs);
	if ((__s32)(end - fs->seq_high) > 0)
		fs->seq_high = end;
}

/* The flow record; needs no packet access, so one copy serves every hook. */
__noinline int nd_flow(const struct nd_meta *m, const struct nd_l3 *l3, const struct nd_l4 *l4,
		       __u32 seg_len)
{
	if (!m || !l3 || !l4)
		return 0;
	struct nd_flow_key key = {};

	key.ifindex = m->ifindex;
	key.dir = m->dir;
	key.proto = l3->proto;
	key.family = l3->family;
	key.sport = l4->sport;
	key.dport = l4->dport;
	__builtin_memcpy(key.saddr, l3->saddr, 16);
	__builtin_memcpy(key.daddr, l3->daddr, 16);

	__u64 now = bpf_ktime_get_coarse_ns();
	struct nd_flow_stats *fs = bpf_map_lookup_elem(&flows, &key);

	if (!fs) {
		struct nd_flow_stats init = {};

		init.first_ns = now;
		bpf_map_update_elem(&flows, &key, &init, BPF_NOEXIST);
		fs = bpf_map_lookup_elem(&flows, &key);
		if (!fs)
			return 0;
	}
	__sync_fetch_and_add(&fs->packets, 1);
	__sync_fetch_and_add(&fs->segs, m->gso_segs);
	__sync_fetch_and_add(&fs->bytes, m->len);
	fs->last_ns = now;
	if (seg_len > fs->max_seg)
		fs->max_seg = seg_len > 0xffff ? 0xffff : seg_len;
	if (l4->encap)
		fs->encap = l4->encap;
	if (l4->wg_msg >= 0 && l4->wg_msg < ND_WG_MSG_TYPES)
		__sync_fetch_and_add(&fs->wg_msgs[l4->wg_msg], 1);
	if (l4->is_tcp) {
		fs->tcp_flags |= l4->tcp_flags;
		if (l4->syn_mss)
			fs->syn_mss = l4->syn_mss;
		track_seq(fs, l4, m->gso_segs);
	}
	return 0;
}

/* Interface counters from the stages' results, then the flow record. */
static __always_inline void account(struct nd_iface_stats *ifs, const struct nd_meta *m,
				    const struct nd_l3 *l3, const struct nd_l4 *l4)
{
	struct nd_dir_stats *ds = &ifs->dir[m->dir & 1];

	/* Per-CPU value: plain increments are exact. */
	ds->packets++;
	ds->segs += m->gso_segs;
	ds->bytes += m->len;
	if (m->gso_segs > 1)
		ds->gso_packets++;
	if (l3->status == ND_NON_IP) {
		ds->non_ip++;
		return;
	}
	if (l3->status != ND_OK) {
		ds->truncated++;
		return;
	}
	if (l4->truncated)
		ds->truncated++;
	if (l4->icmp_frag_needed)
		ds->icmp_frag_needed++;
	if (l4->icmp6_too_big)
		ds->icmp6_too_big++;

	/* Size of one segment on the wire: GSO packets are cut into gso_size payloads. */
	__u32 seg_len = l3->ip_len;
	__u32 segs = m->gso_segs;

	if (segs > 1 && m->gso_size)
		seg_len = l3->hdr_len + l4->hdr_len + m->gso_size;
	/* Generic XDP runs after GRO and gets no GSO metadata: a TCP "frame" larger than the
	 * MTU is an aggregate of MTU-sized segments, not an oversized packet. */
	if (m->xdp && l4->is_tcp && seg_len > ifs->mtu && ifs->mtu > l3->hdr_len + l4->hdr_len) {
		__u32 mss = ifs->mtu - l3->hdr_len - l4->hdr_len;

		segs = (l4->payload + mss - 1) / mss;
		if (!segs)
			segs = 1;
		seg_len = ifs->mtu;
		ds->segs += segs - 1;
	}
	__u32 bucket = size_bucket(seg_len);

	if (bucket < ND_SIZE_BUCKETS)
		ds->size_hist[bucket] += segs;
	if (l3->frag == ND_FRAG_FIRST)
		ds->frag_first++;
	else if (l3->frag == ND_FRAG_LATER)
		ds->frag_later++;
	if (l3->df && seg_len > ifs->mtu)
		ds->df_over_mtu += segs;

	struct nd_meta flow_meta = *m;

	flow_meta.gso_segs = segs;
	nd_flow(&flow_meta, l3, l4, seg_len);
}

SEC("xdp.frags")
int nd_xdp_ingress(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	struct nd_iface_stats *ifs = iface_lookup(ifindex);

	if (!ifs)
		return XDP_PASS; /* not an interface the agent watches */
	struct nd_meta m = {
		.len = bpf_xdp_get_buff_len(ctx),
		.xdp = 1,
		.ifindex = ifindex,
		.gso_segs = 1,
		.dir = ND_DIR_INGRESS,
		.link = ifs->link,
	};
	struct nd_l3 l3 = {};
	struct nd_l4 l4 = {};

	nd_l3_xdp(ctx, &m, &l3);
	if (l3.status == ND_OK)
		nd_l4_xdp(ctx, &m, &l3, &l4);
	account(ifs, &m, &l3, &l4);
	return XDP_PASS;
}

static __always_inline void account_skb(struct __sk_buff *skb, __u32 dir)
{
	__u32 ifindex = skb->ifindex;
	struct nd_iface_stats *ifs = iface_lookup(ifindex);

	if (!ifs)
		return; /* not an interface the agent watches */
	struct nd_meta m = {
		.len = skb->len,
		.ifindex = ifindex,
		.gso_segs = skb->gso_segs ? skb->gso_segs : 1,
		.gso_size = skb->gso_size,
		.dir = dir,
		.link = ifs->link,
	};
	struct nd_l3 l3 = {};
	struct nd_l4 l4 = {};

	nd_l3_skb(skb, &m, &l3);
	if (l3.status == ND_OK)
		nd_l4_skb(skb, &m, &l3, &l4);

	/* Headers cut short may only be cut by the linear area (some drivers and tunnels leave
	 * them in paged fragments). Pulling them in changes nothing about the packet, but costs
	 * a copy of the header area (TCP's clones included), so only when parsing needs it. */
	__u32 linear = skb->data_end - skb->data;

	if ((l3.status == ND_TRUNCATED || l4.truncated) && skb->len > linear && linear < ND_PULL_LEN) {
		bpf_skb_pull_data(skb, skb->len < ND_PULL_LEN ? skb->len : ND_PULL_LEN);
		/* Keeps clang from reusing a ctx offset in a register: the verifier only accepts
		 * ctx field loads at a constant offset from the unmodified ctx pointer. */
		barrier_var(skb);
		__builtin_memset(&l3, 0, sizeof(l3));
		__builtin_memset(&l4, 0, sizeof(l4));
		nd_l3_skb(skb, &m, &l3);
		if (l3.status == ND_OK)
			nd_l4_skb(skb, &m, &l3, &l4);
	}
	account(ifs, &m, &l3, &l4);
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
