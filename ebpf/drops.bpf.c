// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Packets the kernel drops, by device, reason and protocol (tp_btf/kfree_skb).
 *
 * kfree_skb fires for every freed-because-dropped skb, so this is a hot path under loss:
 * one per-CPU hash update, one small read of the network header, nothing else. Reason
 * names are not stored here; the agent resolves them from the kernel's BTF enum
 * skb_drop_reason, which differs between kernels.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

#include "drops.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, ND_MAX_DROP_KEYS);
	__type(key, struct nd_drop_key);
	__type(value, struct nd_drop_stats);
} drops SEC(".maps");

/* Drops whose (device, reason, protocol) no longer fit in `drops`. */
__u64 drops_overflow = 0;

/* Set by the agent from BTF: this kernel's kfree_skb tracepoint passes a drop reason (a
 * third argument, Linux 5.17; distributions backport it). Without it, drops are counted
 * with reason 0 (SKB_DROP_REASON_NOT_SPECIFIED where the enum exists). */
const volatile bool kfree_skb_has_reason = false;

/* Only the first two arguments are declared: a kernel without `reason` refuses a program
 * that reads a third. ctx[2] is read only when the agent found it in BTF (the verifier
 * prunes the branch otherwise). */
SEC("tp_btf/kfree_skb")
int BPF_PROG(nd_kfree_skb, struct sk_buff *skb, void *location)
{
	__u32 reason = 0;

	if (kfree_skb_has_reason) {
		reason = (__u32)ctx[2];
		/* Newer kernels also report "not dropped" and "consumed" here: not drops. */
		if (bpf_core_enum_value_exists(enum skb_drop_reason, SKB_CONSUMED) &&
		    reason <= bpf_core_enum_value(enum skb_drop_reason, SKB_CONSUMED))
			return 0;
	}

	struct nd_drop_key key = {};
	struct net_device *dev = BPF_CORE_READ(skb, dev);

	if (dev) {
		key.ifindex = BPF_CORE_READ(dev, ifindex);
		key.netns = BPF_CORE_READ(dev, nd_net.net, ns.inum);
	} else {
		struct sock *sk = BPF_CORE_READ(skb, sk);

		key.ifindex = BPF_CORE_READ(skb, skb_iif);
		if (sk)
			key.netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	}
	key.reason = reason;
	key.ethertype = bpf_ntohs(BPF_CORE_READ(skb, protocol));

	/* One byte of the network header names the transport protocol. */
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header);

	if (key.ethertype == ETH_P_IP)
		bpf_probe_read_kernel(&key.l4proto, 1, head + nh + 9);
	else if (key.ethertype == ETH_P_IPV6)
		bpf_probe_read_kernel(&key.l4proto, 1, head + nh + 6);

	__u32 len = BPF_CORE_READ(skb, len);
	struct nd_drop_stats *st = bpf_map_lookup_elem(&drops, &key);

	if (!st) {
		struct nd_drop_stats init = {};

		/* EEXIST means another CPU created the entry first: fine, count on ours. */
		bpf_map_update_elem(&drops, &key, &init, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&drops, &key);
		if (!st) {
			__sync_fetch_and_add(&drops_overflow, 1);
			return 0;
		}
	}
	/* Per-CPU value: plain increments are exact. */
	st->packets++;
	st->bytes += len;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
