//! The agent's configuration: defaults, the file, overrides and what each refuses.

use super::*;

#[test]
fn defaults_work_without_a_file() {
    let c = Config::resolve(&Overrides::default()).expect("defaults");
    assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);
    assert_eq!(c.interval, Duration::from_secs(10));
    assert!(c.probe && c.token.is_none());
}

#[test]
fn public_address_needs_a_token() {
    let o = Overrides {
        listen: Some("0.0.0.0:9469".parse().expect("addr")),
        ..Overrides::default()
    };
    let e = Config::resolve(&o).expect_err("must refuse");
    assert!(e.to_string().contains("--token-file"), "{e}");
}

#[test]
fn file_durations_may_be_bare_seconds_and_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("agent.toml");
    std::fs::write(
        &path,
        "interval = 2\nretention = \"3600\"\nprobe_interval = 90.5\n",
    )
    .expect("write");
    let o = Overrides {
        config: Some(path.clone()),
        ..Overrides::default()
    };
    let c = Config::resolve(&o).expect("config");
    assert_eq!(c.interval, Duration::from_secs(2));
    assert_eq!(c.retention, Duration::from_secs(3600));
    assert_eq!(c.probe_interval, Duration::from_millis(90_500));
    for (text, needle) in [
        ("interval = -1\n", "interval: \"-1\" is negative"),
        ("interval = 0\n", "interval: \"0\" is zero"),
        (
            "interval = \"2h\"\n",
            "interval: \"2h\" is too long: at most 1h",
        ),
        (
            "retention = \"soon\"\n",
            "retention: \"soon\" is not a duration",
        ),
    ] {
        std::fs::write(&path, text).expect("write");
        let e = Config::resolve(&o).expect_err(text);
        assert!(e.to_string().contains(needle), "{text}: {e}");
    }
}

#[test]
fn allowed_hosts_must_be_names() {
    for good in ["node1.example", "10.0.0.1", "[2001:db8::1]", "2001:db8::1"] {
        let o = Overrides {
            allowed_host: vec![good.to_owned()],
            ..Overrides::default()
        };
        let c = Config::resolve(&o).expect(good);
        assert_eq!(c.allowed_hosts, vec![good.to_owned()]);
    }
    for bad in ["node1.example:9469", "http://node1.example", "a/b", ""] {
        let o = Overrides {
            allowed_host: vec![bad.to_owned()],
            ..Overrides::default()
        };
        let e = Config::resolve(&o).expect_err(bad);
        assert!(e.to_string().contains("--allowed-host"), "{e}");
    }
}

#[test]
fn flags_override_the_file_and_unknown_keys_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, "interval = \"30s\"\ninterfaces = [\"wg*\"]\n").expect("write");
    let o = Overrides {
        config: Some(path.clone()),
        interval: Some(Duration::from_secs(2)),
        ..Overrides::default()
    };
    let c = Config::resolve(&o).expect("config");
    assert_eq!(c.interval, Duration::from_secs(2));
    assert_eq!(c.interfaces, vec!["wg*".to_owned()]);

    std::fs::write(&path, "max_flows = 1048576\n").expect("write");
    let c = Config::resolve(&o).expect("config");
    assert_eq!(c.max_flows, Some(1_048_576));
    std::fs::write(&path, "max_flows = 10\n").expect("write");
    let e = Config::resolve(&o).expect_err("too small a table must fail");
    assert!(e.to_string().contains("max_flows"), "{e}");

    std::fs::write(&path, "intervall = \"30s\"\n").expect("write");
    let e = Config::resolve(&o).expect_err("typo must fail");
    assert!(e.to_string().contains("intervall"), "{e}");
}
