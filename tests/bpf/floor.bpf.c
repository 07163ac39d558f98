// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Empty programs for netdoctor-bench: the measurement floor.
 *
 * With kernel.bpf_stats_enabled the kernel reads a clock before and after every program
 * run; on some machines (VMs) that alone costs ~100 ns per run. These programs do nothing,
 * so their ns/run *is* that floor, and netdoctor's data-plane cost is its own ns/run minus
 * this, measured in the same run on the same hooks.
 *
 * They return exactly what netdoctor's programs return (XDP_PASS; TCX_NEXT, i.e. -1, on
 * tc) and use the same section types (xdp.frags takes the same generic-XDP path for
 * non-linear skbs as netdoctor's program), so the kernel treats both alike.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

/* tcx: continue with the next program (netdoctor's ND_TC_PASS). */
#define FLOOR_TC_PASS -1

SEC("xdp.frags")
int floor_xdp(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("tc")
int floor_tc_in(struct __sk_buff *skb)
{
	return FLOOR_TC_PASS;
}

SEC("tc")
int floor_tc_out(struct __sk_buff *skb)
{
	return FLOOR_TC_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
