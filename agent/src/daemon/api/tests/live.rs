//! `/api/v1/sockets`: each connection of the last window with what limited it.

use super::fixture::App;
use crate::daemon::state::SocketView;
use crate::kernel::sockets::limits::{Limit, Limits};
use crate::kernel::sockets::rates::SocketRow;
use crate::kernel::sockets::Socket;

#[tokio::test]
async fn sockets_carry_their_limit_share_and_ceiling() {
    let app = App::new();
    let mut socket = Socket::sample(7);
    socket.srtt_us = 40_000;
    let mut row = SocketRow::sample(
        socket,
        Limits {
            limit: Limit::ReceiverWindow,
            limit_share: 0.91,
            rwnd_limited_share: 0.91,
            busy_share: 0.09,
            window_bytes: 65_536,
            ceiling_bps: 13_107_200.0,
            path_rate_bps: 52_428_800.0,
            needed_window_bytes: 262_144,
            ..Limits::default()
        },
    );
    row.throughput_bps = 13e6;
    let idle = SocketRow::sample(Socket::sample(8), Limits::default());
    app.shared.view_mut().sockets = [row, idle]
        .into_iter()
        .map(|row| SocketView {
            interface: "wg0".into(),
            row,
        })
        .collect();

    let r = app.get("/api/v1/sockets?interface=wg0").await;
    assert!(r.status.is_success(), "{}", r.text);
    let items = r.json["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "{}", r.text);
    let s = &items[0];
    assert_eq!(s["interface"], "wg0");
    assert_eq!(s["limit"], "receiver_window");
    assert_eq!(s["limit_share"], 0.91);
    assert_eq!(s["rwnd_limited_share"], 0.91);
    assert_eq!(s["ceiling_bps"], 13_107_200.0);
    assert_eq!(s["path_rate_bps"], 52_428_800.0);
    assert_eq!(s["needed_window_bytes"], 262_144);
    assert_eq!(s["window_bytes"], 65_536);
    assert_eq!(s["receiver_local"], false);
    assert_eq!(s["snd_wnd"], 65_535);
    // Too little traffic: said, never a made-up limit.
    assert_eq!(items[1]["limit"], "unknown");
    assert_eq!(items[1]["ceiling_bps"], -1.0);
}
