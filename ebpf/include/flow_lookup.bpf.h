/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The agent's batched lookup of the flow table (issue 34). Closing a window, the agent looks
 * up each flow active in it: one system call per flow (about a microsecond each) made 100,000
 * active flows cost a tenth of a second. Instead it writes up to ND_LOOKUP_BATCH keys into
 * the mapped array `flow_lookup` and runs nd_lookup_flows once (BPF_PROG_TEST_RUN), which
 * looks them all up in the kernel and copies each value next to its key.
 *
 * A syscall program (Linux 5.14) looping with bpf_loop (5.17), so the verifier checks the
 * loop's body once. Loaded only by the agent where the kernel has both (probed); elsewhere,
 * and in diagnose, the array holds one record and the agent looks flows up one by one.
 */
#ifndef ND_FLOW_LOOKUP_BPF_H
#define ND_FLOW_LOOKUP_BPF_H

/* Its size is the agent's to set before load (ND_LOOKUP_BATCH, or 1 when unused). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ND_LOOKUP_BATCH);
	__type(key, __u32);
	__type(value, struct nd_flow_lookup);
} flow_lookup SEC(".maps");

/* The program's context: how many records of `flow_lookup` hold keys. */
struct nd_lookup_args {
	__u32 count;
};

static long lookup_one(__u32 i, void *unused)
{
	__u32 index = i;
	struct nd_flow_lookup *rec = bpf_map_lookup_elem(&flow_lookup, &index);

	if (!rec)
		return 1; /* past the array: stop */
	struct nd_flow_stats *value = bpf_map_lookup_elem(&flows, &rec->key);

	rec->found = value != NULL;
	if (value)
		__builtin_memcpy(&rec->value, value, sizeof(rec->value));
	return 0;
}

SEC("syscall")
int nd_lookup_flows(struct nd_lookup_args *args)
{
	__u32 count = args->count;

	if (count > ND_LOOKUP_BATCH)
		count = ND_LOOKUP_BATCH;
	bpf_loop(count, lookup_one, NULL, 0);
	return 0;
}

#endif /* ND_FLOW_LOOKUP_BPF_H */
