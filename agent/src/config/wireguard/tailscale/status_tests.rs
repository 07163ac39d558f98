//! The documents as tailscaled 1.98.10 wrote them in the lab (tests/tailscale), trimmed to
//! the fields netdoctor reads and a few it ignores.

use super::*;

/// Node a, its one peer relayed through DERP (UDP between the nodes dropped).
const RELAYED: &str = r#"{
 "Version": "1.98.10-ERR-BuildInfo",
 "TUN": true,
 "BackendState": "Running",
 "Self": {
  "PublicKey": "nodekey:4d48cc6631cb110714552a542c472f6ea00d96ed00238c45a0cffdb90222b247",
  "HostName": "node-a",
  "TailscaleIPs": ["100.64.0.1", "fd7a:115c:a1e0:ab12:4843:cd96:6240:1"],
  "Addrs": ["10.200.1.1:41641"],
  "CurAddr": "",
  "Relay": "lab",
  "PeerRelay": "",
  "RxBytes": 0,
  "TxBytes": 0,
  "LastHandshake": "0001-01-01T00:00:00Z",
  "Online": true
 },
 "Peer": {
  "nodekey:19401049d3aa13a7dfc4fd2c53ff09f8ca1a0c515555b213800cfba9deffd807": {
   "PublicKey": "nodekey:19401049d3aa13a7dfc4fd2c53ff09f8ca1a0c515555b213800cfba9deffd807",
   "HostName": "node-b",
   "DNSName": "node-b",
   "TailscaleIPs": ["100.64.0.2", "fd7a:115c:a1e0:ab12:4843:cd96:6240:2"],
   "AllowedIPs": ["100.64.0.2/32", "fd7a:115c:a1e0:ab12:4843:cd96:6240:2/128"],
   "Addrs": null,
   "CurAddr": "",
   "Relay": "lab",
   "PeerRelay": "",
   "RxBytes": 4872076,
   "TxBytes": 1675839932,
   "LastWrite": "2026-11-24T07:39:56.959794699Z",
   "LastHandshake": "2026-11-24T07:39:03.048503487Z",
   "Online": true,
   "Active": false
  }
 }
}"#;

const DERP_MAP: &str = r#"{
	"Regions": {
		"1": {
			"RegionID": 1,
			"RegionCode": "lab",
			"RegionName": "netdoctor lab",
			"Nodes": [
				{
					"Name": "1a",
					"RegionID": 1,
					"HostName": "10.200.3.2",
					"IPv4": "10.200.3.2",
					"IPv6": "none",
					"STUNPort": 3478,
					"DERPPort": 443,
					"InsecureForTests": true
				}
			]
		},
		"2": {
			"RegionID": 2,
			"RegionCode": "far",
			"Nodes": [
				{"Name": "2a", "RegionID": 2, "HostName": "derp2.example.net", "IPv4": "192.0.2.7", "IPv6": "2001:db8::7"},
				{"Name": "2s", "RegionID": 2, "HostName": "192.0.2.8", "STUNOnly": true},
				{"Name": "2b", "RegionID": 2, "HostName": "192.0.2.9", "DERPPort": 80},
				{"Name": "2c", "RegionID": 2, "HostName": "derp2c.example.net"}
			]
		}
	}
}"#;

fn parse(status: &str) -> (Device, Paths) {
    let status: Status = serde_json::from_str(status).expect("status");
    let derp: DerpMap = serde_json::from_str(DERP_MAP).expect("derp map");
    read("ts0", 41641, &status, &derp)
}

#[test]
fn a_relayed_peer_reads_as_derp_with_its_counters() {
    let (dev, paths) = parse(RELAYED);
    assert_eq!((dev.name.as_str(), dev.listen_port), ("ts0", 41641));
    assert_eq!(dev.peers.len(), 1);
    let p = &dev.peers[0];
    // nodekey:1940… in base64, as `wg` would print the key.
    assert_eq!(p.public_key, "GUAQSdOqE6ffxP0sU/8J+MoaDFFVVbITgAz7qd7/2Ac=");
    assert_eq!(p.endpoint, None);
    assert_eq!(
        p.allowed_ips,
        ["100.64.0.2/32", "fd7a:115c:a1e0:ab12:4843:cd96:6240:2/128"]
    );
    assert_eq!((p.rx_bytes, p.tx_bytes), (4_872_076, 1_675_839_932));
    assert_eq!(p.last_handshake_unix, 1_795_505_943);
    let path = &paths.peers[0];
    assert_eq!(path.public_key, p.public_key);
    assert_eq!((path.host.as_str(), path.path), ("node-b", Path::Derp));
    assert_eq!(path.derp_region, "lab");
    assert!(path.online && path.addrs.is_empty());
    assert_eq!(paths.home_region, "lab");
    let lab: SocketAddr = "10.200.3.2:443".parse().expect("addr");
    assert_eq!(paths.servers_for(path), [lab]);
    assert_eq!(paths.servers_in_use(), [lab]);
}

#[test]
fn derp_servers_are_the_address_literals_of_derp_nodes() {
    let (_, paths) = parse(RELAYED);
    let far: Vec<String> = paths.derp_servers["far"]
        .iter()
        .map(ToString::to_string)
        .collect();
    // Not the STUN-only node; a name without addresses is not resolved.
    assert_eq!(far, ["192.0.2.7:443", "[2001:db8::7]:443", "192.0.2.9:80"]);
}

#[test]
fn direct_and_peer_relay_paths() {
    let direct = RELAYED
        .replace(r#""CurAddr": "","#, r#""CurAddr": "10.200.2.2:41641","#)
        .replace(
            r#""Addrs": null"#,
            r#""Addrs": ["10.200.2.2:41641", "[fd00::2]:41641"]"#,
        );
    let (dev, paths) = parse(&direct);
    assert_eq!(
        dev.peers[0].endpoint,
        Some("10.200.2.2:41641".parse().expect("addr"))
    );
    assert_eq!(paths.peers[0].path, Path::Direct);
    assert_eq!(
        paths.peers[0].addrs.len(),
        2,
        "the one in use is among the candidates"
    );
    let relayed = RELAYED.replace(r#""PeerRelay": "","#, r#""PeerRelay": "10.9.9.9:7777:3","#);
    let (_, paths) = parse(&relayed);
    // The first PeerRelay is Self's (empty); the peer's is set.
    assert_eq!(paths.peers[0].path, Path::PeerRelay);
    assert_eq!(Path::PeerRelay.name(), "peer_relay");
}

#[test]
fn a_node_without_peers_or_derp_map() {
    let status: Status =
        serde_json::from_str(r#"{"BackendState":"NeedsLogin","Self":null,"Peer":null}"#)
            .expect("status");
    let (dev, paths) = read("ts0", 0, &status, &DerpMap::default());
    assert!(dev.peers.is_empty() && paths.peers.is_empty() && paths.home_region.is_empty());
    assert_eq!(unix_seconds("0001-01-01T00:00:00Z"), 0);
    assert_eq!(unix_seconds("2026-11-24T08:39:03+01:00"), 1_795_505_943);
}
