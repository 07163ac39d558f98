/**
 * What limits a connection (`limit` of /api/v1/sockets rows, docs/api.md), in plain words for
 * the Connections view. Pure: no DOM.
 */

import { known } from './format.js';

/** Each limit in plain words: a short label and what it means. */
export const LIMITS = {
  receiver_window: {
    label: "receiver's window",
    explain: "Data waited for the receiving end's window: its receive buffer (tcp_rmem, SO_RCVBUF) is full or too small for the path.",
  },
  send_buffer: {
    label: 'send buffer',
    explain: 'Everything written was in flight and the application waited for room in its own send buffer (tcp_wmem, SO_SNDBUF).',
  },
  congestion: {
    label: 'congestion',
    explain: 'Sending as fast as the congestion window or the network allowed: the path (its capacity, queues or loss) set the pace.',
  },
  application: {
    label: 'application',
    explain: 'The application had nothing more to send: it, not the network, set the pace.',
  },
  unknown: {
    label: 'too little traffic',
    explain: 'Too little traffic in the window to say what limits it.',
  },
};

/** "receiver's window 97 %" for a socket row; "" for rows without the field (older agents). */
export function limitText(s) {
  const l = s && LIMITS[s.limit];
  if (!l) return '';
  if (s.limit === 'unknown' || !known(s.limit_share)) return l.label;
  return `${l.label} ${Math.round(s.limit_share * 100)} %`;
}

/**
 * A sentence on why: the limit's meaning, under loss for congestion, and for a window the
 * ceiling it allows beside what the path carried.
 */
export function limitTitle(s) {
  const l = s && LIMITS[s.limit];
  if (!l) return '';
  const parts = [l.explain];
  if (s.limit === 'congestion' && s.retransmits > 0) parts.push('It retransmitted: under loss.');
  if ((s.limit === 'receiver_window' || s.limit === 'send_buffer') && known(s.ceiling_bps) && s.ceiling_bps > 0) {
    const mbit = (bps) => (bps / 1e6).toFixed(1);
    const kib = (b) => (b / 1024).toFixed(0);
    parts.push(`${kib(s.window_bytes)} KiB per ${(s.srtt_us / 1000).toFixed(1)} ms round trip allows at most ${mbit(s.ceiling_bps)} Mbit/s; the path to this host carried ${mbit(s.path_rate_bps)} Mbit/s.`);
  }
  return parts.join(' ');
}
