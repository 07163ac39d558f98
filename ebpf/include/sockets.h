/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Types shared between sockets.bpf.c and the Rust `sockets` collector: TCP socket
 * snapshots (iter/tcp), close events (ring buffer) and retransmission aggregates.
 */
#ifndef NETDOCTOR_SOCKETS_H
#define NETDOCTOR_SOCKETS_H

#define ND_MAX_SOCKS 16384
#define ND_CC_NAME_LEN 16
/* ~2,500 close events (208 bytes each): 0.2 s of 12,000 connections per second, read
 * every 100 ms. The ring stays mapped in the agent for its whole life and every page of
 * it counts in its RSS, so it is no larger than that. */
#define ND_SOCK_EVENTS_BYTES (512 * 1024)

/* A TCP connection seen from its own host. IPv4 addresses occupy the first 4 bytes;
 * IPv4-mapped IPv6 sockets keep family 6 and are folded to IPv4 by the agent. */
struct nd_sock_key {
	__u32 netns; /* network namespace inode: tracepoints see every namespace */
	__u8 family; /* 4 or 6 */
	__u8 pad[3];
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport; /* host byte order */
	__u16 dport;
};

/* What tcp_info would say, read straight from struct tcp_sock. Raw kernel units: the
 * agent converts (srtt_us is already divided by 8, rttvar_us by 4, as tcp_info does). */
struct nd_sock_info {
	struct nd_sock_key key;
	__u64 cookie;          /* socket cookie: stable identity across snapshots */
	__u64 bytes_acked;
	__u64 bytes_received;
	__u64 bytes_sent;
	__u64 bytes_retrans;
	__u32 ifindex;         /* device of the cached route, else the bound device, else 0 */
	__u32 state;           /* TCP_ESTABLISHED = 1, ... */
	__u32 srtt_us;
	__u32 rttvar_us;
	__u32 min_rtt_us;
	__u32 snd_cwnd;
	__u32 snd_ssthresh;
	__u32 total_retrans;
	__u32 lost_out;
	__u32 retrans_out;
	__u32 segs_out;
	__u32 data_segs_out;
	__u32 mss_cache;
	__u32 pmtu;            /* icsk_pmtu_cookie: the path MTU the socket believes in */
	__u32 reordering;
	__u32 rate_delivered;  /* delivery rate = rate_delivered * mss / rate_interval_us */
	__u32 rate_interval_us;
	__s32 mtu_probe_low;   /* icsk_mtup.search_low/high: the MSS range probing explores */
	__s32 mtu_probe_high;
	__u8 ca_state;         /* TCP_CA_Open = 0, Disorder, CWR, Recovery, Loss */
	__u8 mtu_probing;      /* icsk_mtup.enabled */
	__u8 pad[2];
	char cc[ND_CC_NAME_LEN];
};

/* A connection that closed: its last figures and how long it lived. */
struct nd_sock_close {
	struct nd_sock_info info;
	__u64 duration_ns; /* 0 when it opened before netdoctor started */
	__u32 old_state;
	__u32 pad;
};

/* Retransmissions per connection, aggregated in the kernel. */
struct nd_retrans_stats {
	__u64 events;     /* tcp_retransmit_skb calls */
	__u64 segs;       /* segments those skbs held */
	__u64 bytes;
	__u64 full_segs;  /* segments of a full MSS: what a PMTU blackhole keeps losing */
	__u64 small_segs; /* shorter tails */
	__u64 last_ns;
	__u32 ifindex;
	__u32 mss;        /* mss_cache at the last retransmission */
};

#endif /* NETDOCTOR_SOCKETS_H */
