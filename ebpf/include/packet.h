/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Types shared between the packet data plane (packet.bpf.c) and the Rust agent.
 *
 * Every struct here is a map key or value: libbpf-cargo turns them into Rust types in the
 * generated skeleton, so the layouts below are the single definition. Keep them free of
 * implicit padding (explicit `pad` fields) so Rust and C agree byte for byte and keys hash
 * the same whatever the stack held before.
 */
#ifndef NETDOCTOR_PACKET_H
#define NETDOCTOR_PACKET_H

/* Map sizes: fixed, so the kernel memory the maps take is known up front. The agent copies
 * some of them (agent/src/kernel/packet/limits.rs checks the copies against this build). */
#define ND_MAX_IFACES 256
/* When an interface does not own slot ifindex % ND_MAX_IFACES, its slot is found through an
 * array for an ifindex below this, through a hash above. */
#define ND_SLOT_ARRAY_IFINDEX 65536
#define ND_MAX_FLOWS 65536
/* Per-CPU flow cache in front of `flows` (see flow_cache.bpf.h): slots per CPU (a power of 2),
 * and entries of the shared TCP sequence table. */
#define ND_FLOW_CACHE_SLOTS 1024
#define ND_SEQ_SLOTS 4096
#define ND_MAX_PTB 1024
#define ND_SIZE_BUCKETS 10
/* Upper bounds (IP length) of the first ND_SIZE_BUCKETS - 1 size buckets; the last takes the
 * rest. Constants rather than settings: compared as immediates on the hot path, where each
 * loaded setting is one more cache line. The agent's copy (SIZE_BUCKET_BOUNDS) is checked
 * against the object's `size_bounds` (packet.bpf.c) by limits.rs. */
#define ND_SIZE_BOUND_0 576
#define ND_SIZE_BOUND_1 1280
#define ND_SIZE_BOUND_2 1380
#define ND_SIZE_BOUND_3 1420
#define ND_SIZE_BOUND_4 1440
#define ND_SIZE_BOUND_5 1450
#define ND_SIZE_BOUND_6 1480
#define ND_SIZE_BOUND_7 1500
#define ND_SIZE_BOUND_8 9000
#define ND_MAX_USER_PORTS 8
#define ND_LOCAL_V4 8
#define ND_LOCAL_V6 4
#define ND_LOCAL_SEQ_BITS 12
#define ND_LOCAL_SEQ_SLOTS (1 << ND_LOCAL_SEQ_BITS)
/* WireGuard sessions received (wg_path.bpf.h): entries of the LRU table behind the flow cache's
 * slots, and handshakes this host sent. */
#define ND_WG_SESSIONS 2048
#define ND_WG_HANDSHAKES 4096

enum nd_dir {
	ND_DIR_INGRESS = 0,
	ND_DIR_EGRESS = 1,
};

/* Where the network header starts: Ethernet-framed devices vs raw-IP (wg, tun). */
enum nd_link {
	ND_LINK_ETHER = 0,
	ND_LINK_RAWIP = 1,
};

/* What an interface's packets go through (struct nd_iface_dir's `path`, bits). Settings of
 * the interface rather than of the program: they lie in the line every packet loads first,
 * where a program setting (.rodata, .bss) is one more cache line per packet, 15-20 ns under
 * traffic on some machines (docs/performance.md). With no bit set, every IP packet gets a
 * flow record and plain TCP and UDP are parsed inline. */
enum nd_path {
	/* This host's own TCP takes the local path first (local_tcp.bpf.h). */
	ND_PATH_LOCAL_TCP = 1,
	/* Every packet through the general stages, never inline: the same figures, slower; for
	 * the test that proves both parse alike. */
	ND_PATH_STAGES = 2,
	/* Tunnel ports are configured (encap.bpf.h's user_ports): UDP compares its ports with
	 * them. The agent sets it after the first port is in place. */
	ND_PATH_USER_PORTS = 4,
	/* Received IPv4 (IPv6) TCP may be this host's own: the host does not forward the
	 * family and its addresses fit `local_addrs` (local_tcp.bpf.h), which a received
	 * segment is compared with only then. Without, a router's received packets would load
	 * that line for nothing. */
	ND_PATH_LOCAL_IN4 = 8,
	ND_PATH_LOCAL_IN6 = 16,
};

/* Encapsulation recognised on an underlay flow. */
enum nd_encap {
	ND_ENCAP_NONE = 0,
	ND_ENCAP_WIREGUARD = 1,
	ND_ENCAP_VXLAN = 2,
	ND_ENCAP_GENEVE = 3,
	ND_ENCAP_FASTD = 4,
	ND_ENCAP_TINC = 5,
	ND_ENCAP_OTHER = 6,
	ND_ENCAP_GRE = 7,      /* IP protocol 47 */
	ND_ENCAP_IPIP = 8,     /* IP protocol 4: IPv4 inside */
	ND_ENCAP_IP6_IN = 9,   /* IP protocol 41: IPv6 inside */
};

/* WireGuard message types 1..4, stored at index type - 1. */
enum nd_wg_msg {
	ND_WG_INITIATION = 0,
	ND_WG_RESPONSE = 1,
	ND_WG_COOKIE = 2,
	ND_WG_DATA = 3,
	ND_WG_MSG_TYPES = 4,
};

/* Counters for one direction of one interface (per CPU, summed by the agent). */
struct nd_dir_stats {
	/* First cache line (with the interface's header): what every packet counts. */
	__u64 packets;        /* frames or skbs seen by the hook */
	__u64 segs;           /* wire segments: a GSO super-packet counts gso_segs */
	__u64 bytes;          /* frame bytes as the hook sees them (L2 header included) */
	__u64 gso_packets;    /* super-packets (more than one segment) */
	/* TCP segments of this host's own connections that took the local path (local_tcp.bpf.h):
	 * counted here, not per flow; their connections are described by socket telemetry. */
	__u64 local_segs;
	__u32 local_max_seg;  /* largest of those segments (IP length) on this CPU since load */
	__u32 local_max_hits; /* packets of that size since it became the largest */
	/* Second line: the sizes of full-size and small segments alike. */
	__u64 size_hist[ND_SIZE_BUCKETS]; /* per-segment IP length, bounds from the agent */
	/* The rest: what only some packets count. */
	__u64 non_ip;         /* ARP, LLDP, ...: counted, not parsed */
	__u64 truncated;      /* headers shorter than they claim: counted, never dropped */
	__u64 frag_first;     /* fragments with offset 0 and more to follow (not atomic ones) */
	__u64 frag_later;     /* fragments with offset > 0 */
	__u64 df_over_mtu;    /* DF (or IPv6) segments larger than the interface MTU */
	__u64 icmp_frag_needed; /* ICMP type 3 code 4 */
	__u64 icmp6_too_big;  /* ICMPv6 type 2 */
	__u64 local_retrans;  /* received local-path segments carrying data seen before */
};

/* One direction of one watched interface on one CPU: a value of `iface_stats`, at index
 * (cpu * ND_MAX_IFACES + slot) * 2 + dir. The agent gives an interface the slot
 * ifindex % ND_MAX_IFACES when it is free (another one when two watched interfaces share
 * the remainder, found through `iface_slot`), so a packet finds its counters from its
 * ifindex and its CPU alone: one load, no chain of lookups, which under load costs a cache
 * miss each. The agent writes mtu, link and path, then `ifindex`, which makes the slot
 * live; the programs count only into a value whose `ifindex` is the packet's, so they never
 * allocate. 256 bytes in a page-aligned (mappable) array: the header and the counters
 * every packet touches share the first two cache lines. */
struct nd_iface_dir {
	__u32 ifindex; /* the interface that owns the slot; 0: free */
	__u32 mtu;
	__u8 link;      /* enum nd_link */
	/* enum nd_path: ND_PATH_LOCAL_TCP where socket telemetry describes this host's own
	 * connections (the agent decides). */
	__u8 path;
	/* The local path's sequence hint (local_tcp.bpf.h): the connection whose data this CPU saw
	 * last here (a 16-bit tag), and the highest sequence end it saw. Programs only. */
	__u16 seq_tag;
	__u32 seq_high;
	struct nd_dir_stats s;
	__u64 pad2[6];
};

/* Flow identity. IPv4 addresses occupy the first 4 bytes of the 16-byte fields.
 * ICMP/ICMPv6: sport = type << 8 | code, dport = echo identifier (0 otherwise). */
struct nd_flow_key {
	__u32 ifindex;
	__u8 dir;    /* enum nd_dir */
	__u8 proto;  /* IPPROTO_* */
	__u8 family; /* 4 or 6 */
	__u8 pad;
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport; /* host byte order */
	__u16 dport;
};

/* What a flow carried in one of the agent's windows, numbered by `nd_window`
 * (flow_window.bpf.h): the agent takes a window's counts from here instead of subtracting
 * two readings of the table, so it keeps nothing per flow between windows. A flow holds the
 * window its latest packets fall in and the one before, by the number's parity, so that the
 * agent can read the window it just closed while packets already count in the next. 40
 * bytes. */
struct nd_flow_win {
	__u32 window;       /* the window these count; 0: none */
	__u32 packets;
	__u64 bytes;
	__u32 segs;
	__u32 retrans_segs;
	__u32 wg_msgs[ND_WG_MSG_TYPES];
};

/* A flow whose counts of the agent's window `window` began (flow_window.bpf.h): a record of
 * the ring `flow_active`, which tells the agent what to read when it closes the window. */
struct nd_flow_active {
	struct nd_flow_key key;
	__u32 window;
};

struct nd_flow_stats {
	__u64 packets;
	__u64 segs;
	__u64 bytes;
	__u64 first_ns; /* CLOCK_MONOTONIC (coarse) */
	__u64 last_ns;
	__u32 seq_high;     /* highest TCP sequence end seen (valid when seq_valid) */
	__u32 retrans_segs; /* TCP segments carrying already-seen data: retransmitted or reordered */
	__u32 wg_msgs[ND_WG_MSG_TYPES];
	__u16 syn_mss;  /* MSS option of the last SYN */
	__u16 max_seg;  /* largest IP length of one segment */
	__u8 tcp_flags; /* OR of all TCP flags seen */
	__u8 encap;     /* enum nd_encap, for underlay flows */
	__u8 seq_valid;
	__u8 pad;
	/* The windows (flow_window.bpf.h): [n & 1] holds window n. Zero while the agent does
	 * not number windows (diagnose, `netdoctor flows` read the totals above). */
	struct nd_flow_win win[2];
};

/* One flow for the agent's batched table lookup (flow_lookup.bpf.h): the agent writes
 * `key`, the lookup writes `found` and, when found, `value`. 200 bytes. */
#define ND_LOOKUP_BATCH 1024
struct nd_flow_lookup {
	struct nd_flow_key key;
	__u32 found;
	struct nd_flow_stats value;
};

/* What one CPU counted of a WireGuard session's transport-data messages (wg_path.bpf.h), in a
 * flow cache slot or in the table `wg_rx`. 40 bytes. */
struct nd_wg_ctr {
	__u64 high;    /* highest counter seen */
	__u64 low;     /* lowest counter seen */
	__u64 window;  /* bit i: counter high - i seen on this CPU (duplicates are not counted) */
	__u64 last_ns; /* CLOCK_MONOTONIC (coarse) of the latest message, written once a tick */
	__u32 packets; /* messages (a GSO packet counts its segments); 0: none on this CPU */
	__u32 dups;    /* messages whose counter this CPU had seen */
};

/* One slot of the per-CPU flow cache: a flow and what it carried since this CPU took the
 * slot. The agent reads the slots (mapped read-only) and adds them to the table's values;
 * both are cumulative and a slot's counts reach the table only when the slot is retired
 * (or flushed, before its 32-bit byte count would wrap).
 *
 * 192 bytes, so a slot is exactly three cache lines of the page-aligned array: the first
 * holds everything a cache hit reads and writes, the second what changes once a tick or
 * rarely, the third what only WireGuard messages touch: the message counts and, on an
 * underlay's ingress, the session the peer's transport data currently carries (its receiver
 * index and counters: wg_path.bpf.h), so that a data message costs this one lookup.
 * `gen_begin`/`gen_end` form a sequence lock for the reader: a retirement (of the slot, or
 * of its WireGuard session) writes `gen_end`, then the contents, then `gen_begin`, so a
 * copy read after `gen_begin` and before `gen_end` with both equal is not torn, and a
 * generation that did not move between two reads means nothing was retired (its counts did
 * not reach a table) in between. */
struct nd_flow_slot {
	/* First cache line: everything a cache hit reads or writes. */
	struct nd_flow_key key;
	__u32 last_j;       /* jiffies (low 32 bits) of last_ns: the clock is read once a tick */
	__u32 packets;      /* 32 bits: the slot is flushed to the table before bytes wrap, */
	__u32 segs;         /* and packets and segments never exceed bytes */
	__u32 bytes;
	__u16 max_seg;
	__u8 tcp_flags;
	__u8 encap;
	/* Second line: once a tick, per retransmission, at retirement. */
	__u64 first_ns;     /* when this CPU took the slot for the flow */
	__u64 last_ns;
	__u32 touch_j;      /* jiffies of the last lookup of the flow's table entry (LRU age) */
	__u32 retrans_segs;
	__u32 used;         /* 0: empty slot */
	__u32 gen_begin;
	__u32 gen_end;
	__u32 window;       /* the agent's window its counts fall in (flow_window.bpf.h) */
	__u32 pad[6];
	/* Third line: WireGuard messages only. */
	__u32 wg_msgs[ND_WG_MSG_TYPES];
	__u32 wg_index;     /* the session in `wg` (valid when wg.packets) */
	__u32 wg_last_j;    /* jiffies (low 32 bits) of wg.last_ns */
	struct nd_wg_ctr wg;
};

/* An entry of the shared TCP sequence table: the highest sequence end seen of one flow,
 * shared by every CPU so that retransmissions are recognised wherever a flow's packets
 * are processed. 64 bytes: one cache line of the page-aligned array. */
struct nd_seq_slot {
	__u64 state;  /* tag << 32 | highest sequence end; 0: free */
	__u32 last_j; /* jiffies of the last data segment, to hand an idle entry over */
	__u32 pad;
	struct nd_flow_key key; /* whose state it is, to write it back when handing over */
	__u32 pad2;
};

/* An ICMP "fragmentation needed" / ICMPv6 "packet too big", keyed by who sent it and the
 * flow it quotes. */
struct nd_ptb_key {
	__u32 ifindex;
	__u8 dir;
	__u8 family;      /* 4 or 6 */
	__u8 inner_proto; /* protocol of the quoted packet */
	__u8 pad;
	__u8 from[16];        /* the router that reported the smaller MTU */
	__u8 inner_saddr[16]; /* the quoted packet: the flow that was too big */
	__u8 inner_daddr[16];
	__u16 inner_sport;
	__u16 inner_dport;
};

struct nd_ptb_stats {
	__u64 count;
	__u64 last_ns;
	__u32 mtu; /* the MTU the last message announced */
	__u32 pad;
};

/* This host's addresses, for the local path's ingress test (local_tcp.bpf.h); written by the
 * agent. `v4_ok` / `v6_ok`: every address of the family is listed and the host does not
 * forward that family, so a TCP segment to a listed address is for a local socket. */
struct nd_local_addrs {
	__u32 v4_ok; /* first: with the IPv4 addresses, the IPv4 test reads one cache line */
	__u32 v6_ok;
	__u32 v4[ND_LOCAL_V4];
	__u8 v6[ND_LOCAL_V6][16];
};

/* The local path's TCP sequence state: tag << 32 | highest sequence end (0: free). One
 * cache line each (no false sharing between connections), shared by all CPUs like
 * flow_seq's. */
struct nd_local_seq {
	__u64 state;
	__u64 pad[7];
};

/* A WireGuard session as one watched interface receives it: the receiver index its
 * transport-data messages carry (this host's index of the session, chosen in its
 * handshake), read as a host-order number from the wire's little-endian bytes. */
struct nd_wg_key {
	__u32 ifindex;
	__u32 index;
};

/* What one CPU saw of a session's transport-data messages (a per-CPU value of `wg_rx`: the
 * agent takes the largest `high`, the smallest `low` and the sum of `packets` over CPUs,
 * with the flow cache slots' shares). 64 bytes. */
struct nd_wg_rx {
	struct nd_wg_ctr c;
	__u32 last_j;  /* jiffies (low 32 bits) of c.last_ns */
	__u16 sport;   /* the source of the first message this CPU saw: the peer's endpoint */
	__u8 family;
	__u8 pad;
	__u8 saddr[16];
};

/* Roles of a handshake this host sent (struct nd_wg_hs). */
enum nd_wg_role {
	ND_WG_INITIATED = 1, /* our initiation: answered by the peer's response */
	ND_WG_RESPONDED = 2, /* our response: confirmed by the peer's first transport data */
};

/* A handshake message this host sent, keyed by its sender index (a __u32): when it left and
 * when the peer's answer arrived, both bpf_ktime_get_ns (CLOCK_MONOTONIC). 40 bytes. */
struct nd_wg_hs {
	__u64 sent_ns;
	__u64 done_ns; /* 0: no answer (yet) */
	__u32 ifindex; /* where it left */
	__u8 role;     /* enum nd_wg_role */
	__u8 family;
	__u16 dport;   /* where it went: the peer's endpoint */
	__u8 daddr[16];
};

#endif /* NETDOCTOR_PACKET_H */
