/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The agent's windows: what each flow carried in each of the agent's intervals, counted
 * where its totals are, so that the agent reads a window instead of keeping every flow's
 * previous totals to subtract (a table of a million flows, issue 34).
 *
 * - `nd_window` numbers the agent's current window; 0 (diagnose, `netdoctor flows`, which
 *   read the totals) counts no window: nothing here runs.
 * - The agent closes window n by setting `nd_window` to n + 1, letting a tick pass, and
 *   reading every flow's win[n & 1] that holds window n plus the cache slots that hold it.
 *   Packets meanwhile count in window n + 1, at the other parity.
 * - A packet on the table path adds to its entry's window of the moment. A cache slot holds
 *   the counts of one window: its first packet of a later window, checked once a tick where
 *   the slot reads the clock anyway, flushes it to the table first (so after the agent's
 *   tick of grace no packet of the new window sits in a slot of the old). A retired slot's
 *   counts go to the window they were counted in; if the entry's parity already holds a
 *   later window, the agent read that slot when it closed theirs, and they are not added
 *   again.
 * - A flow whose window begins in its table entry is recorded in the ring `flow_active`,
 *   once a window (a slot's counts reach the entry's window when the slot is retired or
 *   flushed, and the agent reads the slots themselves): closing a window, the agent reads
 *   only those flows and the slots, not the whole table. When the ring is full the record
 *   is counted in `nd_active_lost`, and the agent reads the whole table for that window.
 * - Starting a window resets the parity's counts: two CPUs starting the same flow's window
 *   at the same instant may lose the other's first packet (the table path only, where the
 *   totals' adds stay atomic).
 */
#ifndef NETDOCTOR_FLOW_WINDOW_H
#define NETDOCTOR_FLOW_WINDOW_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "packet.h"

/* The agent's current window (it alone writes it); 0: no window is counted. */
__u32 nd_window = 0;

/* Flows whose window began, for the agent (struct nd_flow_active). Its size is the agent's
 * to set before load; this one serves a data plane that counts no window. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} flow_active SEC(".maps");

/* Records `flow_active` had no room for. */
__u64 nd_active_lost = 0;

/* Records that `key`'s counts of window `n` began. */
static __always_inline void active_push(const struct nd_flow_key *key, __u32 n)
{
	struct nd_flow_active rec;

	__builtin_memcpy(&rec.key, key, sizeof(rec.key));
	rec.window = n;
	/* No wakeup: the agent reads the ring when it closes a window, it does not wait on it. */
	if (bpf_ringbuf_output(&flow_active, &rec, sizeof(rec), BPF_RB_NO_WAKEUP))
		__sync_fetch_and_add(&nd_active_lost, 1);
}

static __always_inline __u32 window_now(void)
{
	return *(volatile __u32 *)&nd_window;
}

/* The counts of window `n` of `key`'s entry `fs`, started (and recorded) if its parity held
 * an older one; NULL when no window is counted or when the parity holds a later window (`n`
 * was read already). */
static __always_inline struct nd_flow_win *win_of(const struct nd_flow_key *key,
						  struct nd_flow_stats *fs, __u32 n)
{
	if (!n)
		return NULL;
	struct nd_flow_win *w = &fs->win[n & 1];
	__u32 held = w->window;

	if (held == n)
		return w;
	if ((__s32)(held - n) > 0)
		return NULL;
	w->packets = 0;
	w->bytes = 0;
	w->segs = 0;
	w->retrans_segs = 0;
	__builtin_memset(w->wg_msgs, 0, sizeof(w->wg_msgs));
	barrier();
	w->window = n;
	active_push(key, n);
	return w;
}

/* Adds the counts of `c` (a retired slot's, as slot_counts() gives them) to window `n`. */
static __always_inline void win_merge(const struct nd_flow_key *key, struct nd_flow_stats *fs,
				      __u32 n, const struct nd_flow_stats *c)
{
	struct nd_flow_win *w = win_of(key, fs, n);

	if (!w)
		return;
	__sync_fetch_and_add(&w->packets, (__u32)c->packets);
	__sync_fetch_and_add(&w->segs, (__u32)c->segs);
	__sync_fetch_and_add(&w->bytes, c->bytes);
	if (c->retrans_segs)
		__sync_fetch_and_add(&w->retrans_segs, c->retrans_segs);
#pragma unroll
	for (int i = 0; i < ND_WG_MSG_TYPES; i++) {
		if (c->wg_msgs[i])
			__sync_fetch_and_add(&w->wg_msgs[i], c->wg_msgs[i]);
	}
}

/* A new entry's windows when it is created with the counts `init` already in it (a retired
 * slot whose entry the LRU evicted): they fall in window `n`. The caller records the entry
 * (active_push) once it is created. */
static __always_inline void win_init(struct nd_flow_stats *init, __u32 n)
{
	if (!n)
		return;
	struct nd_flow_win *w = &init->win[n & 1];

	w->window = n;
	w->packets = (__u32)init->packets;
	w->segs = (__u32)init->segs;
	w->bytes = init->bytes;
	w->retrans_segs = init->retrans_segs;
	__builtin_memcpy(w->wg_msgs, init->wg_msgs, sizeof(w->wg_msgs));
}

#endif /* NETDOCTOR_FLOW_WINDOW_H */
