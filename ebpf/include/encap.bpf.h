/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Recognising tunnel encapsulations on an underlay from the first bytes of a UDP payload.
 *
 * WireGuard uses any port, so it is recognised by shape: a message type 1-4, three zero
 * reserved bytes and the exact length each type has on the wire (wireguard-go
 * device/noise-protocol.go: initiation 148, response 92, cookie reply 64, data 32 + 16k, or
 * 32 + MTU when padding would exceed the MTU).
 * VXLAN and GENEVE are recognised by their IANA ports and header bits; daemons such as
 * fastd or tinc only by the ports the agent configures. Tunnels without UDP by their IP
 * protocol number and the first bits of what follows (classify_ip): GRE (47), IPv4 inside
 * (4: ipip, ip6tnl mode ipip) and IPv6 inside (41: sit, ip6tnl's ip6ip6); only the general
 * parser (stages.bpf.h) sees them, since the fast path takes TCP and UDP alone.
 */
#ifndef NETDOCTOR_ENCAP_H
#define NETDOCTOR_ENCAP_H

#include "packet.h"
#include "parse.bpf.h"

#define VXLAN_PORT 4789
#define VXLAN_LINUX_PORT 8472 /* the Linux driver's pre-IANA default, still used by flannel */
#define GENEVE_PORT 6081

#define WG_INITIATION_LEN 148
#define WG_RESPONSE_LEN 92
#define WG_COOKIE_LEN 64
#define WG_DATA_MIN_LEN 32 /* header 16 + Poly1305 tag 16 (a keepalive) */

/* Ports of other UDP tunnel daemons (0 = unused slot). Writable globals rather than
 * read-only data: the agent adds the port of a TUN/TAP daemon it finds while running. It
 * writes a slot's encapsulation before its port, so a packet never sees a port with a
 * stale kind. */
__u16 user_ports[ND_MAX_USER_PORTS] = {};
__u8 user_port_encap[ND_MAX_USER_PORTS] = {};

/* Returns the WireGuard message index (enum nd_wg_msg) or -1. */
static __always_inline int wg_message(const __u8 *payload, const void *end, __u32 len)
{
	if ((void *)(payload + 4) > end)
		return -1;
	if (payload[1] | payload[2] | payload[3])
		return -1;
	switch (payload[0]) {
	case 1:
		return len == WG_INITIATION_LEN ? ND_WG_INITIATION : -1;
	case 2:
		return len == WG_RESPONSE_LEN ? ND_WG_RESPONSE : -1;
	case 3:
		return len == WG_COOKIE_LEN ? ND_WG_COOKIE : -1;
	case 4:
		/* The inner packet is padded to a multiple of 16 unless that would exceed the
		 * tunnel MTU; then it is exactly the MTU, at least 576 bytes (RFC 791). */
		if (len < WG_DATA_MIN_LEN)
			return -1;
		return (len - WG_DATA_MIN_LEN) % 16 == 0 || len - WG_DATA_MIN_LEN >= 576 ? ND_WG_DATA
											: -1;
	}
	return -1;
}

/* The fields after a WireGuard message's type word: the 32-bit index at offset 4 (the
 * sender's in an initiation or response, the receiver's in a cookie or transport data) and
 * the 8 bytes at offset 8 (the counter of transport data; the receiver index of a response
 * in their low half). Returns 0 when they are not in the linear area. Both are read as
 * host-order numbers from the wire's little-endian bytes; the agent never reorders them. */
static __always_inline int wg_fields(const __u8 *payload, const void *end, __u32 *idx,
				     __u64 *ctr)
{
	if ((void *)(payload + 16) > end)
		return 0;
	*idx = *(const __u32 *)(payload + 4);
	*ctr = *(const __u64 *)(payload + 8);
	return 1;
}

/* Classifies a UDP datagram; sets *wg_msg for WireGuard. `len` is the UDP payload length.
 * `ports`: compare with the configured tunnel ports (ND_PATH_USER_PORTS; with none
 * configured, skipping them spares the line they lie in). */
static __always_inline __u8 classify_udp(__u16 sport, __u16 dport, const __u8 *payload,
					 const void *end, __u32 len, int ports, int *wg_msg)
{
	*wg_msg = -1;
	if (ports) {
#pragma unroll
		for (int i = 0; i < ND_MAX_USER_PORTS; i++) {
			__u16 port = user_ports[i];

			if (port && (port == sport || port == dport))
				return user_port_encap[i];
		}
	}
	if (dport == VXLAN_PORT || dport == VXLAN_LINUX_PORT) {
		/* The I flag must be set; everything else in the first byte is reserved. */
		if ((void *)(payload + 8) <= end && payload[0] == 0x08)
			return ND_ENCAP_VXLAN;
		return ND_ENCAP_NONE;
	}
	if (dport == GENEVE_PORT) {
		if ((void *)(payload + 8) <= end && (payload[0] >> 6) == 0)
			return ND_ENCAP_GENEVE;
		return ND_ENCAP_NONE;
	}
	*wg_msg = wg_message(payload, end, len);
	return *wg_msg >= 0 ? ND_ENCAP_WIREGUARD : ND_ENCAP_NONE;
}

/* Classifies the payload of an IP packet whose protocol is neither TCP nor UDP (`payload`
 * is where the transport header would be). */
static __always_inline __u8 classify_ip(__u8 proto, const __u8 *payload, const void *end)
{
	if ((void *)(payload + 4) > end)
		return ND_ENCAP_NONE;
	switch (proto) {
	case IPPROTO_GRE:
		/* Version 0 (RFC 2784): the low three bits of the second byte. Version 1 is
		 * PPTP's enhanced GRE (RFC 2637), a VPN's control-and-data channel, not ours. */
		return (payload[1] & 7) == 0 ? ND_ENCAP_GRE : ND_ENCAP_NONE;
	case IPPROTO_IPIP:
		return (payload[0] >> 4) == 4 ? ND_ENCAP_IPIP : ND_ENCAP_NONE;
	case IPPROTO_IPV6:
		return (payload[0] >> 4) == 6 ? ND_ENCAP_IP6_IN : ND_ENCAP_NONE;
	}
	return ND_ENCAP_NONE;
}

#endif /* NETDOCTOR_ENCAP_H */
