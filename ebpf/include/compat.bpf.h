/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Helpers that not every supported kernel has, chosen by what the running kernel offers
 * rather than by its version number (distributions backport helpers).
 *
 * bpf_core_enum_value_exists(enum bpf_func_id, ...) is resolved by libbpf against the
 * running kernel's BTF when the object loads; it becomes a constant, the verifier walks only
 * the branch taken and removes the other one, so the choice costs nothing per packet and a
 * helper the kernel lacks is never seen by its verifier.
 */
#ifndef NETDOCTOR_COMPAT_H
#define NETDOCTOR_COMPAT_H

#include <bpf/bpf_core_read.h>

/* CLOCK_MONOTONIC in ns: the coarse (tick-granular, cheaper) clock where the kernel has it
 * (5.11+), else the precise one. Both count from the same origin; readers compare these
 * stamps with CLOCK_MONOTONIC at tick resolution. */
static __always_inline __u64 nd_now_ns(void)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_ktime_get_coarse_ns))
		return bpf_ktime_get_coarse_ns();
	return bpf_ktime_get_ns();
}

/* The whole frame of an XDP packet, fragments included where the kernel has multi-buffer
 * XDP (5.18+, with bpf_xdp_get_buff_len); before that a frame is its linear part. The agent
 * clears BPF_F_XDP_HAS_FRAGS (section xdp.frags) on kernels that refuse the flag. */
static __always_inline __u32 nd_xdp_len(struct xdp_md *ctx)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_xdp_get_buff_len))
		return bpf_xdp_get_buff_len(ctx);
	return ctx->data_end - ctx->data;
}

#endif /* NETDOCTOR_COMPAT_H */
