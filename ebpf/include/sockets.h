/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Types shared between sockets.bpf.c and the Rust `sockets` collector: TCP socket
 * snapshots (iter/tcp), close events (ring buffer) and retransmission aggregates.
 */
#ifndef NETDOCTOR_SOCKETS_H
#define NETDOCTOR_SOCKETS_H

#define ND_MAX_SOCKS 16384
#define ND_CC_NAME_LEN 16
/* ~1,700 close events (304 bytes each): 0.14 s of 12,000 connections per second, read
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
	__u8 rate_app_limited; /* the last delivery-rate sample was application-limited */
	__u8 chrono_type;      /* TCP_CHRONO_UNSPEC = 0 (idle), BUSY, RWND_LIMITED, SNDBUF_LIMITED */
	char cc[ND_CC_NAME_LEN];
	/* When this record was read: bpf_jiffies64() and bpf_ktime_get_ns(). Two records give
	 * the kernel's HZ (the chrono stats count jiffies); the agent never assumes it. */
	__u64 jiffies;
	__u64 now_ns;
	__u64 born_ns;         /* bpf_ktime_get_ns() when netdoctor saw it open, 0 if not */
	/* tcp_get_info_chrono_stats(): jiffies spent busy (sending, limited by neither
	 * window nor buffer), limited by the receiver's window, limited by the send buffer;
	 * the running state's time so far included, as tcp_info does. 32-bit, wrapping. */
	__u32 chrono_busy;
	__u32 chrono_rwnd_limited;
	__u32 chrono_sndbuf_limited;
	__u32 snd_wnd;         /* the peer's advertised window, bytes */
	__u32 max_window;      /* the largest window the peer ever advertised, bytes */
	__u32 rcv_wnd;         /* the window this end advertises, bytes */
	__u32 window_clamp;    /* the largest window this end will advertise */
	__u32 rcv_ssthresh;    /* this end's current window threshold */
	__s32 sndbuf;          /* sk_sndbuf: the send buffer's size, bytes (skb truesize) */
	__s32 rcvbuf;          /* sk_rcvbuf */
	__s32 wmem_queued;     /* sk_wmem_queued: send buffer in use (truesize) */
	__u32 notsent_bytes;   /* write_seq - snd_nxt: written, not sent yet */
	__u32 unacked_bytes;   /* snd_nxt - snd_una: sent, not acknowledged */
	__u32 delivered;       /* segments delivered (tcpi_delivered) */
	__u32 app_limited;     /* nonzero while delivery-rate samples are application-limited */
	__u32 dsack_dups;      /* DSACKed segments (0 where the kernel lacks the field) */
	__u32 reord_seen;      /* reordering events (0 where the kernel lacks the field) */
	__u32 pad2;
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
	__u64 small_segs; /* shorter tails, bare SYNs and FINs */
	__u64 last_ns;
	__u32 ifindex;
	__u32 mss;        /* mss_cache at the last retransmission */
};

#endif /* NETDOCTOR_SOCKETS_H */
