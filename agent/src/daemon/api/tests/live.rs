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

/// `/api/v1/flows`: the window's flows of watched interfaces, largest first, each page
/// with its interface's name; a deleted interface's flows (still in the table) are not
/// served.
#[tokio::test]
async fn flows_are_served_by_bytes_with_their_interface_and_only_of_watched_ones() {
    use crate::kernel::packet::flows::test_flow;
    use crate::kernel::views::Direction;

    let app = App::new();
    {
        let mut view = app.shared.view_mut();
        view.flows = std::sync::Arc::new(vec![
            test_flow(3, Direction::Ingress, "10.0.0.1", 1000, "10.0.0.2", 5_000),
            test_flow(4, Direction::Egress, "fd00::1", 2000, "fd00::2", 90_000),
            test_flow(
                9,
                Direction::Ingress,
                "10.9.0.1",
                3000,
                "10.9.0.2",
                1_000_000,
            ),
            test_flow(3, Direction::Egress, "10.0.0.2", 5201, "10.0.0.1", 40_000),
        ]);
        view.flow_interfaces = [(3, "eth0".to_owned()), (4, "wg0".to_owned())].into();
    }
    let r = app.get("/api/v1/flows").await;
    assert!(r.status.is_success(), "{}", r.text);
    assert_eq!(r.json["total"], 3, "{}", r.text);
    let items = r.json["items"].as_array().expect("items");
    let got: Vec<(&str, u64)> = items
        .iter()
        .map(|f| {
            let name = f["interface"].as_str().unwrap_or("?");
            (name, f["bytes"].as_u64().unwrap_or(0))
        })
        .collect();
    assert_eq!(got, [("wg0", 90_000), ("eth0", 40_000), ("eth0", 5_000)]);
    assert_eq!(items[0]["src"], "fd00::1");

    let r = app
        .get("/api/v1/flows?interface=eth0&limit=1&offset=1")
        .await;
    assert_eq!(r.json["total"], 2, "{}", r.text);
    let items = r.json["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(
        (items[0]["interface"].as_str(), items[0]["bytes"].as_u64()),
        (Some("eth0"), Some(5_000))
    );
}

/// Pages of `/api/v1/flows` over flows of equal bytes neither repeat nor skip one, and a
/// page near the top of a larger list holds the largest flows in order.
#[tokio::test]
async fn flow_pages_are_a_total_order() {
    use crate::kernel::packet::flows::test_flow;
    use crate::kernel::views::Direction;

    let app = App::new();
    {
        let mut view = app.shared.view_mut();
        let mut flows: Vec<_> = (0..50u16)
            .map(|p| test_flow(3, Direction::Ingress, "10.0.0.1", p, "10.0.0.2", 7_000))
            .collect();
        flows.extend(
            (0..30u16).map(|p| test_flow(3, Direction::Egress, "10.0.0.2", p, "10.0.0.1", 100)),
        );
        flows.push(test_flow(
            3,
            Direction::Egress,
            "10.0.0.3",
            9,
            "10.0.0.1",
            9_000,
        ));
        view.flows = std::sync::Arc::new(flows);
        view.flow_interfaces = [(3, "eth0".to_owned())].into();
    }
    let r = app.get("/api/v1/flows?limit=3").await;
    let bytes: Vec<u64> = r.json["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|f| f["bytes"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(bytes, [9_000, 7_000, 7_000], "{}", r.text);

    let mut seen = std::collections::BTreeSet::new();
    for offset in (1..51).step_by(7) {
        let r = app
            .get(&format!("/api/v1/flows?limit=7&offset={offset}"))
            .await;
        for f in r.json["items"].as_array().expect("items") {
            if f["bytes"] == 7_000 {
                assert!(seen.insert(f["src_port"].as_u64()), "repeated: {f}");
            }
        }
    }
    assert_eq!(seen.len(), 50, "every flow of equal bytes once");
}
