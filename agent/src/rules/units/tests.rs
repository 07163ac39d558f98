//! Units of evidence values: every suffix, the unknown sentinels, and every built-in
//! rule's evidence names.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;

fn v(name: &str, x: Value) -> String {
    value(name, &x)
}

/// Digit runs of 5 or more with no separator: the "unformatted integer above 9,999" of
/// issue 35's check.
fn long_digit_runs(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|run| run.len() >= 5)
        .map(str::to_owned)
        .collect()
}

#[test]
fn bytes_in_iec_units() {
    assert_eq!(v("tx_bytes", json!(0)), "0 B");
    assert_eq!(v("tx_bytes", json!(1023)), "1023 B");
    assert_eq!(v("tx_bytes", json!(1536)), "1.50 KiB");
    assert_eq!(v("udp_wireguard_bytes", json!(15_848_054)), "15.1 MiB");
    assert_eq!(v("derp_tcp_bytes", json!(21_450_376)), "20.5 MiB");
    assert_eq!(v("bytes", json!(5_u64 << 30)), "5.00 GiB");
    assert_eq!(v("needed_tcp_rmem_max", json!(6_291_456)), "6.00 MiB");
    assert_eq!(v("window_kib", json!(64.0)), "64.0 KiB");
    assert_eq!(v("needed_window_kib", json!(3072.0)), "3.00 MiB");
}

#[test]
fn ratios_shares_and_percents_as_percent() {
    assert_eq!(v("tcp_retrans_ratio", json!(0.042)), "4.2 %");
    assert_eq!(v("retrans_ratio", json!(0.0025)), "0.25 %");
    assert_eq!(v("full_size_share", json!(0.5)), "50.0 %");
    assert_eq!(v("tcp_retrans_ratio", json!(0)), "0 %");
    assert_eq!(v("loss_percent", json!(5.1)), "5.1 %");
    assert_eq!(v("busiest_percent", json!(100)), "100.0 %");
    assert_eq!(v("cpu_percent_of_one_core", json!(97.04)), "97.0 %");
    assert_eq!(v("percent_of_limit", json!(0.5)), "0.50 %");
}

#[test]
fn durations_in_ms_and_s() {
    assert_eq!(v("srtt_ms", json!(12.345)), "12.3 ms");
    assert_eq!(v("rtt_ms", json!(1.5)), "1.50 ms");
    assert_eq!(v("rtt_ms", json!(0.25)), "250 µs");
    assert_eq!(v("rtt_ms", json!(250)), "250 ms");
    assert_eq!(v("rtt_ms", json!(1500)), "1.50 s");
    assert_eq!(v("keepalive_s", json!(25)), "25 s");
    assert_eq!(v("handshake_age_s", json!(200)), "3 min 20 s");
    assert_eq!(v("handshake_age_s", json!(7500)), "2 h 5 min");
    assert_eq!(v("handshake_age_s", json!(3 * 86_400)), "3 d");
    assert_eq!(v("handshake_age_s", json!(90_000)), "1 d 1 h");
}

#[test]
fn rates_in_bits_per_second_and_per_second() {
    assert_eq!(v("throughput_bps", json!(999)), "999 bit/s");
    assert_eq!(v("throughput_bps", json!(12_300_000)), "12.3 Mbit/s");
    assert_eq!(v("loss_based_limit_bps", json!(2.5e9)), "2.50 Gbit/s");
    assert_eq!(v("ceiling_mbps", json!(940.6)), "941 Mbit/s");
    assert_eq!(v("rate_mbps", json!(12.3)), "12.3 Mbit/s");
    assert_eq!(v("throughput_mbps", json!(0.5)), "500 kbit/s");
    assert_eq!(v("packets_per_s", json!(123_456.7)), "123,457/s");
}

#[test]
fn counts_get_separators_settings_stay_plain() {
    assert_eq!(v("leaked_packets", json!(70_527)), "70,527");
    assert_eq!(v("dropped", json!(1_234_567)), "1,234,567");
    assert_eq!(v("flow_table_capacity", json!(65_536)), "65,536");
    assert_eq!(v("initiations_sent", json!(3)), "3");
    assert_eq!(v("expected", json!(10_000)), "10,000");
    assert_eq!(v("tunnel_mtu", json!(1420)), "1420");
    assert_eq!(v("largest_fitting_mtu", json!(1420)), "1420");
    assert_eq!(v("overhead_expected", json!(80)), "80");
    assert_eq!(v("pid", json!(123_456)), "123456");
    assert_eq!(v("tailscale_port", json!(41_641)), "41641");
    assert_eq!(v("rp_filter", json!(1)), "1");
}

#[test]
fn text_flags_lists_and_objects_as_they_are() {
    assert_eq!(v("endpoint", json!("192.0.2.2:51820")), "192.0.2.2:51820");
    assert_eq!(v("probe_blackhole", json!(true)), "true");
    assert_eq!(v("uplinks", json!(["eth0", "eth1"])), "eth0 eth1");
    assert_eq!(v("nexthops", json!([])), "none");
    assert_eq!(
        v(
            "measured",
            json!([{"iface": "eth1", "weight": 1, "bytes": 2_097_152, "packets": 12_345, "flows": 3}])
        ),
        "[bytes 2.00 MiB flows 3 iface eth1 packets 12,345 weight 1]"
    );
    assert_eq!(
        v(
            "members",
            json!([{"name": "eth0", "tx_bytes": -1, "tx_packets": 10}, {"name": "eth1", "tx_bytes": 0, "tx_packets": 0}])
        ),
        "[name eth0 tx_bytes n/a tx_packets 10; name eth1 tx_bytes 0 B tx_packets 0]"
    );
}

#[test]
fn unknown_values_are_na_in_every_unit() {
    for name in [
        "tx_bytes",
        "window_kib",
        "tcp_retrans_ratio",
        "loss_percent",
        "srtt_ms",
        "handshake_age_s",
        "throughput_bps",
        "ceiling_mbps",
        "packets_per_s",
        "leaked_packets",
        "overhead_measured",
        "pid",
        "endpoint",
        "no_convention_at_all",
    ] {
        assert_eq!(v(name, json!(-1)), NA, "{name}=-1");
        assert_eq!(v(name, json!(-1.0)), NA, "{name}=-1.0");
        assert_eq!(v(name, Value::Null), NA, "{name}=null");
    }
    assert_eq!(v("leaked_source", json!("")), NA);
    // A real negative value is not the sentinel.
    assert_eq!(v("overhead_measured", json!(-16)), "-16");
}

#[test]
fn names_of_no_convention_have_no_unit() {
    assert_eq!(unit_of("frobnication"), None);
    assert_eq!(unit_of("tx_widgets"), None);
    assert_eq!(unit_of("tx_bytes"), Some(Unit::Bytes));
}

/// Every `[evidence]` name of every built-in rule (rules/*.toml) follows a convention, so a
/// rule with a new suffix fails here instead of printing raw numbers.
#[test]
fn every_builtin_evidence_name_has_a_unit() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules");
    let mut names = 0;
    let mut unknown = Vec::new();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a rule file");
        let rule: toml::Table = toml::from_str(&text).expect("a rule's TOML");
        let Some(evidence) = rule.get("evidence").and_then(toml::Value::as_table) else {
            continue;
        };
        for name in evidence.keys() {
            names += 1;
            if unit_of(name).is_none() {
                unknown.push(format!("{}: {name}", path.display()));
            }
        }
    }
    assert!(
        names > 100,
        "only {names} evidence names found in {}",
        dir.display()
    );
    assert!(
        unknown.is_empty(),
        "evidence names with no unit convention (add a suffix or a name in cli/units): {unknown:?}"
    );
}

/// The evidence of the demo's finding and of the Tailscale report (issue 35): no `-1`, no
/// unformatted integer above 9,999, no raw float ratio.
#[test]
fn demo_and_tailscale_evidence_lines_read_in_units() {
    let demo: BTreeMap<String, Value> = serde_json::from_value(json!({
        "tunnel_mtu": 1500, "overhead_expected": 60, "overhead_measured": -1,
        "underlay_route_mtu": 1500, "underlay_path_mtu": -1, "largest_fitting_mtu": 1440,
    }))
    .expect("a map");
    let line = evidence_line(&demo);
    assert_eq!(
        line,
        "largest_fitting_mtu=1440, overhead_expected=60, overhead_measured=n/a, \
         tunnel_mtu=1500, underlay_path_mtu=n/a, underlay_route_mtu=1500"
    );
    let tailscale: BTreeMap<String, Value> = serde_json::from_value(json!({
        "path": "derp", "host": "peer-b", "derp_region": "fra", "derp_servers": ["192.0.2.9"],
        "derp_tcp_bytes": 21_450_376, "udp_wireguard_bytes": 15_848_054,
        "tx_bytes": 30_000_000, "rx_bytes": 7_298_430, "tailscale_port": 41_641,
    }))
    .expect("a map");
    let line = evidence_line(&tailscale);
    assert!(line.contains("derp_tcp_bytes=20.5 MiB"), "{line}");
    assert!(line.contains("udp_wireguard_bytes=15.1 MiB"), "{line}");
    let cubic: BTreeMap<String, Value> = serde_json::from_value(json!({
        "retrans_ratio": 0.0421337, "retransmits": 123_456, "segments_sent": 2_930_000,
        "srtt_ms": 48.123, "throughput_bps": 81_234_567.0,
    }))
    .expect("a map");
    let line = evidence_line(&cubic);
    assert!(line.contains("retrans_ratio=4.2 %"), "{line}");
    assert!(line.contains("srtt_ms=48.1 ms"), "{line}");
    assert!(line.contains("throughput_bps=81.2 Mbit/s"), "{line}");
    for l in [evidence_line(&demo), evidence_line(&tailscale), line] {
        assert!(!l.contains("-1"), "{l}");
        // The Tailscale port is a number people read as it is (as `ss` prints it).
        let runs: Vec<String> = long_digit_runs(&l)
            .into_iter()
            .filter(|r| r != "41641")
            .collect();
        assert!(runs.is_empty(), "unformatted integers {runs:?} in {l}");
        assert!(!l.contains("0.0421"), "{l}");
    }
}

/// Every `[evidence]` name of the built-in rules.
fn builtin_evidence_names() -> std::collections::BTreeSet<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules");
    let mut names = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("the rules directory") {
        let path = entry.expect("a directory entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a rule file");
        let rule: toml::Table = toml::from_str(&text).expect("a rule's TOML");
        if let Some(evidence) = rule.get("evidence").and_then(toml::Value::as_table) {
            names.extend(evidence.keys().cloned());
        }
    }
    names
}

/// The dashboard prints evidence as the text report does: dashboard/unit/units.golden.json
/// holds, for every built-in evidence name, its unit and sample values printed here; the
/// dashboard's unit test (unit/units.test.mjs) holds dashboard/web/units.js to the same
/// file. `UPDATE_GOLDEN=1` rewrites it after a deliberate change.
#[test]
fn the_dashboard_golden_file_is_what_the_agent_prints() {
    let samples = [
        json!(-1),
        json!(0),
        json!(0.0421),
        json!(48.123),
        json!(15_848_054),
        json!(""),
        json!([]),
    ];
    let mut units = serde_json::Map::new();
    let mut values = Vec::new();
    let mut names: Vec<String> = builtin_evidence_names().into_iter().collect();
    names.push("no_convention_at_all".into());
    for name in &names {
        let unit = unit_of(name).map(|u| format!("{u:?}"));
        units.insert(name.clone(), json!(unit));
        for sample in &samples {
            values.push(json!([name, sample, value(name, sample)]));
        }
    }
    let nested = json!([{"iface": "eth1", "weight": 1, "bytes": 2_097_152, "packets": 12_345}]);
    values.push(json!(["measured", nested, value("measured", &nested)]));
    let golden = json!({"units": units, "values": values});
    let text = format!("{}\n", serde_json::to_string_pretty(&golden).expect("JSON"));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../dashboard/unit/units.golden.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).expect("write the golden file");
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text,
        "{} differs from what the agent prints: run this test with UPDATE_GOLDEN=1, then \
         make dashboard/web/units.js pass unit/units.test.mjs",
        path.display()
    );
}
