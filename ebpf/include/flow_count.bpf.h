/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The flow table's entry count, from the kernel's own count (issue 34): hash maps count their
 * elements per CPU since Linux 6.6, and bpf_map_sum_elem_count() sums them. The agent reads
 * it through a bpf_map iterator at each window it closes: a few microseconds, where counting
 * by a walk of a million-entry table takes about a second. Loaded only by the agent, and only
 * where the kernel's BTF has the kfunc; elsewhere the agent counts by a walk, less often.
 */
#ifndef ND_FLOW_COUNT_BPF_H
#define ND_FLOW_COUNT_BPF_H

/* Weak: the object loads on kernels without it (the program is then never loaded). */
extern __s64 bpf_map_sum_elem_count(const struct bpf_map *map) __ksym __weak;

/* The flow table's map id, written by the agent after load: the iterator visits every map
 * of the host and reports this one only. */
__u32 nd_count_map_id = 0;

SEC("iter/bpf_map")
int nd_count_flows(struct bpf_iter__bpf_map *ctx)
{
	struct bpf_map *map = ctx->map;

	if (!map || map->id != nd_count_map_id)
		return 0;
	__s64 entries = bpf_map_sum_elem_count(map);

	bpf_seq_write(ctx->meta->seq, &entries, sizeof(entries));
	return 0;
}

#endif /* ND_FLOW_COUNT_BPF_H */
