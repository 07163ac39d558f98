// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * TCP socket telemetry without kprobes or fentry (neither works everywhere):
 * - iter/tcp snapshots every TCP socket of the namespace with what tcp_info would say,
 *   plus the congestion control name and the egress device;
 * - tp_btf/tcp_retransmit_skb aggregates retransmissions per connection in the kernel,
 *   splitting full-MSS segments from short tails;
 * - tp_btf/inet_sock_set_state reports closing connections on a ring buffer, so flows
 *   shorter than the snapshot interval are not missed.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

#include "sockets.h"

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_CLOSE 7

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ND_MAX_SOCKS);
	__type(key, struct nd_sock_key);
	__type(value, struct nd_retrans_stats);
} retrans SEC(".maps");

/* Birth time of connections, keyed by socket cookie, to report durations at close. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ND_MAX_SOCKS);
	__type(key, __u64);
	__type(value, __u64);
} born SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, ND_SOCK_EVENTS_BYTES);
} sock_events SEC(".maps");

/* Close events the ring buffer had no room for (the agent reports them). */
__u64 sock_events_lost = 0;

/* Network namespace (inode) whose sockets to report; 0 = all. Tracepoints fire for every
 * namespace: filtering here keeps other namespaces' churn out of the maps and the ring. */
const volatile __u32 target_netns = 0;

static __always_inline bool foreign(const struct sock *sk)
{
	return target_netns && BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum) != target_netns;
}

/* A socket's identity for matching snapshots and timing connections: its cookie where
 * tracing programs may ask for it (bpf_get_socket_cookie on a socket pointer, Linux 5.12;
 * the kernel's BTF then has the helper's prototype), else its address, unique among live
 * sockets (a socket freed and another allocated at the same address between two snapshots
 * of a window would be taken for one; the cookie has no such case). Decided when the
 * object loads; the verifier never sees the branch not taken. */
static __always_inline __u64 sock_id(const struct sock *sk)
{
	if (bpf_core_type_exists(btf_bpf_get_socket_ptr_cookie))
		return bpf_get_socket_cookie((void *)sk);
	return (__u64)(unsigned long)sk;
}

/* Keeps the event type in the skeleton's BTF-derived types. */
struct nd_sock_close nd_sock_close_type = {};

static __always_inline void fill_key(const struct sock *sk, struct nd_sock_key *key)
{
	const struct inet_sock *inet = (const struct inet_sock *)sk;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	key->netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	/* inet_sport, not skc_num: closing unhashes the socket and zeroes skc_num before the
	 * TCP_CLOSE state change is traced. */
	key->sport = bpf_ntohs(BPF_CORE_READ(inet, inet_sport));
	key->dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (family == AF_INET) {
		key->family = 4;
		__u32 s = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		__u32 d = BPF_CORE_READ(sk, __sk_common.skc_daddr);

		__builtin_memcpy(key->saddr, &s, 4);
		__builtin_memcpy(key->daddr, &d, 4);
	} else {
		key->family = 6;
		BPF_CORE_READ_INTO(&key->saddr, sk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(&key->daddr, sk, __sk_common.skc_v6_daddr);
	}
}

static __always_inline __u32 egress_ifindex(const struct sock *sk)
{
	struct dst_entry *dst = BPF_CORE_READ(sk, sk_dst_cache);

	if (dst) {
		__u32 ifindex = BPF_CORE_READ(dst, dev, ifindex);

		if (ifindex)
			return ifindex;
	}
	return BPF_CORE_READ(sk, __sk_common.skc_bound_dev_if);
}

/* What tcp_get_info() reads for the time a connection spent in each state, the windows,
 * the buffers and the delivery rate's application limit: read with the snapshot, so no
 * per-packet cost. The chrono stats are kept in jiffies; the running state's time so far
 * is added as tcp_get_info_chrono_stats() does. */
static __always_inline void fill_limits(struct tcp_sock *tp, struct nd_sock_info *info)
{
	const struct sock *sk = (const struct sock *)tp;
	__u32 stat[3] = {};
	/* The key from the stack: the verifiers of 5.10 and 6.1 take a map key only from the
	 * stack or a map value, not from ring buffer memory (info may be a reserved record):
	 * "R2 type=alloc_mem expected=fp, pkt, pkt_meta, map_key, map_value". */
	__u64 cookie = info->cookie;
	__u64 *birth = bpf_map_lookup_elem(&born, &cookie);

	info->jiffies = bpf_jiffies64();
	info->now_ns = bpf_ktime_get_ns();
	info->born_ns = birth ? *birth : 0;
	BPF_CORE_READ_INTO(&stat, tp, chrono_stat);
	/* A u8 bitfield before Linux 6.15, a plain u8 since: the probed read fits both. */
	info->chrono_type = BPF_CORE_READ_BITFIELD_PROBED(tp, chrono_type);
	__u32 running = (__u32)info->jiffies - BPF_CORE_READ(tp, chrono_start);

	if (info->chrono_type == 1)
		stat[0] += running;
	else if (info->chrono_type == 2)
		stat[1] += running;
	else if (info->chrono_type == 3)
		stat[2] += running;
	info->chrono_busy = stat[0];
	info->chrono_rwnd_limited = stat[1];
	info->chrono_sndbuf_limited = stat[2];
	info->rate_app_limited = BPF_CORE_READ_BITFIELD_PROBED(tp, rate_app_limited);
	info->app_limited = BPF_CORE_READ(tp, app_limited);
	info->delivered = BPF_CORE_READ(tp, delivered);
	info->snd_wnd = BPF_CORE_READ(tp, snd_wnd);
	info->max_window = BPF_CORE_READ(tp, max_window);
	info->rcv_wnd = BPF_CORE_READ(tp, rcv_wnd);
	info->window_clamp = BPF_CORE_READ(tp, window_clamp);
	info->rcv_ssthresh = BPF_CORE_READ(tp, rcv_ssthresh);
	info->sndbuf = BPF_CORE_READ(sk, sk_sndbuf);
	info->rcvbuf = BPF_CORE_READ(sk, sk_rcvbuf);
	info->wmem_queued = BPF_CORE_READ(sk, sk_wmem_queued);
	__u32 snd_nxt = BPF_CORE_READ(tp, snd_nxt);

	info->notsent_bytes = BPF_CORE_READ(tp, write_seq) - snd_nxt;
	info->unacked_bytes = snd_nxt - BPF_CORE_READ(tp, snd_una);
	if (bpf_core_field_exists(tp->dsack_dups))
		info->dsack_dups = BPF_CORE_READ(tp, dsack_dups);
	if (bpf_core_field_exists(tp->reord_seen))
		info->reord_seen = BPF_CORE_READ(tp, reord_seen);
}

static __always_inline void fill_info(struct tcp_sock *tp, struct nd_sock_info *info)
{
	const struct sock *sk = (const struct sock *)tp;
	const struct inet_connection_sock *icsk = &tp->inet_conn;

	fill_key(sk, &info->key);
	info->cookie = sock_id(sk);
	info->state = BPF_CORE_READ(sk, __sk_common.skc_state);
	info->ifindex = egress_ifindex(sk);
	info->bytes_acked = BPF_CORE_READ(tp, bytes_acked);
	info->bytes_received = BPF_CORE_READ(tp, bytes_received);
	info->bytes_sent = BPF_CORE_READ(tp, bytes_sent);
	info->bytes_retrans = BPF_CORE_READ(tp, bytes_retrans);
	/* tcp_info conventions: srtt is kept << 3, mdev << 2. */
	info->srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3;
	info->rttvar_us = BPF_CORE_READ(tp, mdev_us) >> 2;
	info->min_rtt_us = BPF_CORE_READ(tp, rtt_min.s[0].v);
	info->snd_cwnd = BPF_CORE_READ(tp, snd_cwnd);
	info->snd_ssthresh = BPF_CORE_READ(tp, snd_ssthresh);
	info->total_retrans = BPF_CORE_READ(tp, total_retrans);
	info->lost_out = BPF_CORE_READ(tp, lost_out);
	info->retrans_out = BPF_CORE_READ(tp, retrans_out);
	info->segs_out = BPF_CORE_READ(tp, segs_out);
	info->data_segs_out = BPF_CORE_READ(tp, data_segs_out);
	info->mss_cache = BPF_CORE_READ(tp, mss_cache);
	info->reordering = BPF_CORE_READ(tp, reordering);
	info->rate_delivered = BPF_CORE_READ(tp, rate_delivered);
	info->rate_interval_us = BPF_CORE_READ(tp, rate_interval_us);
	info->pmtu = BPF_CORE_READ(icsk, icsk_pmtu_cookie);
	info->mtu_probe_low = BPF_CORE_READ(icsk, icsk_mtup.search_low);
	info->mtu_probe_high = BPF_CORE_READ(icsk, icsk_mtup.search_high);
	info->mtu_probing = BPF_CORE_READ_BITFIELD_PROBED(&icsk->icsk_mtup, enabled);
	info->ca_state = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_ca_state);
	BPF_CORE_READ_STR_INTO(&info->cc, icsk, icsk_ca_ops, name);
	fill_limits(tp, info);
}

SEC("iter/tcp")
int nd_iter_tcp(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct nd_sock_info info = {};

	if (!skc) {
		/* The end of the iteration: a record with state 0 and only the clocks, so every
		 * snapshot, even of no socket, says when it was taken in jiffies. */
		info.jiffies = bpf_jiffies64();
		info.now_ns = bpf_ktime_get_ns();
		bpf_seq_write(ctx->meta->seq, &info, sizeof(info));
		return 0;
	}
	/* Request and time-wait sockets have no tcp_sock: skipped. */
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(skc);

	if (!tp)
		return 0;
	fill_info(tp, &info);
	bpf_seq_write(ctx->meta->seq, &info, sizeof(info));
	return 0;
}

/* Set by the agent from BTF: this kernel's tcp_retransmit_skb passes a third argument,
 * `err`, and then fires for failed attempts too. */
const volatile bool retransmit_has_err = false;

#define EAGAIN 11
#define ENOMEM 12
#define EBUSY 16
#define EHOSTUNREACH 113

/* The errors __tcp_retransmit_skb() returns before it adds the segments to total_retrans
 * (the previous copy still queued, no memory, no route, the window closed): nothing left
 * TCP. One that fails later, in the stack or the device (a firewall or queue drop), was
 * counted and left TCP at its size, so it counts here too and the sizes add up to
 * total_retrans. (-EHOSTUNREACH from the later route lookup is lost with the early one.) */
static __always_inline bool retransmit_not_counted(int err)
{
	return err == -EBUSY || err == -ENOMEM || err == -EHOSTUNREACH || err == -EAGAIN;
}

/* The segments a retransmission added to total_retrans, as the kernel counts them:
 * tcp_skb_pcount(), the skb's gso_segs, cut at gso_size, the MSS of the moment. That MSS
 * can be below mss_cache (an outgoing header carrying SACK blocks leaves less room for
 * data), so a full-size skb resent then is two segments on the wire: dividing by mss_cache
 * counted one. *full: those of a whole gso_size (of mss_cache for a single segment, whose
 * skb keeps no gso_size); *small: a shorter tail, or a bare SYN or FIN. */
static __always_inline void retransmit_segs(const struct sk_buff *skb, __u32 len, __u32 mss,
					    __u32 *full, __u32 *small)
{
	/* skb_shinfo(): at skb->end, an offset from head on 64-bit kernels. */
	const unsigned char *head = BPF_CORE_READ(skb, head);
	const struct skb_shared_info *shinfo = (const void *)(head + BPF_CORE_READ(skb, end));
	__u32 segs = BPF_CORE_READ(shinfo, gso_segs);
	__u32 size = BPF_CORE_READ(shinfo, gso_size);

	if (segs > 1 && size) {
		*full = len / size;
		*small = len > *full * size ? 1 : 0;
		return;
	}
	/* One segment (or, never seen, no count at all: one, as the kernel's minimum). */
	*full = mss && len >= mss ? 1 : 0;
	*small = 1 - *full;
}

/* Only the first two arguments are declared: a kernel without `err` would refuse a
 * program that declares it. ctx[2] is read only when the agent found it in BTF (the
 * verifier prunes the branch otherwise). */
SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(nd_tcp_retransmit, const struct sock *sk, const struct sk_buff *skb)
{
	if (retransmit_has_err && retransmit_not_counted((int)ctx[2]))
		return 0;
	if (foreign(sk))
		return 0;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);

	if (!tp)
		return 0;
	struct nd_sock_key key = {};

	fill_key(sk, &key);
	struct nd_retrans_stats *st = bpf_map_lookup_elem(&retrans, &key);

	if (!st) {
		struct nd_retrans_stats init = {};

		bpf_map_update_elem(&retrans, &key, &init, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&retrans, &key);
		if (!st)
			return 0;
	}
	/* A write-queue skb holds payload only: its length is the data being resent. */
	__u32 len = BPF_CORE_READ(skb, len);
	__u32 mss = BPF_CORE_READ(tp, mss_cache);
	__u32 full, small;

	retransmit_segs(skb, len, mss, &full, &small);
	__sync_fetch_and_add(&st->events, 1);
	__sync_fetch_and_add(&st->segs, full + small);
	__sync_fetch_and_add(&st->bytes, len);
	__sync_fetch_and_add(&st->full_segs, full);
	if (small)
		__sync_fetch_and_add(&st->small_segs, small);
	st->last_ns = bpf_ktime_get_ns();
	st->ifindex = egress_ifindex(sk);
	st->mss = mss;
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(nd_sock_state, const struct sock *sk, const int oldstate, const int newstate)
{
	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP || foreign(sk))
		return 0;
	__u64 cookie = sock_id(sk);

	if (newstate == TCP_SYN_SENT || (newstate == TCP_ESTABLISHED && oldstate != TCP_SYN_SENT)) {
		__u64 now = bpf_ktime_get_ns();

		bpf_map_update_elem(&born, &cookie, &now, BPF_NOEXIST);
		return 0;
	}
	if (newstate != TCP_CLOSE)
		return 0;

	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
	__u64 *birth = bpf_map_lookup_elem(&born, &cookie);

	if (!tp || (!birth && oldstate != TCP_ESTABLISHED && oldstate < 4))
		goto out; /* a connection attempt that never got anywhere and we never saw start */
	struct nd_sock_close *ev = bpf_ringbuf_reserve(&sock_events, sizeof(*ev), 0);

	if (!ev) {
		__sync_fetch_and_add(&sock_events_lost, 1);
		goto out;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	fill_info(tp, &ev->info);
	ev->duration_ns = birth ? bpf_ktime_get_ns() - *birth : 0;
	ev->old_state = oldstate;
	bpf_ringbuf_submit(ev, 0);
out:
	bpf_map_delete_elem(&born, &cookie);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
