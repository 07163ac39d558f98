//! WireGuard UAPI sockets: believed only when root owns them.

use std::path::PathBuf;

use anyhow::{ensure, Result};
use netdoctor_lab::{ci, Netns};

use crate::{diagnose, own, USER};

/// A UAPI socket at `/var/run/wireguard/NAME.sock`, owned by `uid`, answering `get=1`
/// with one peer whose endpoint is `endpoint`, as wireguard-go would.
struct FakeUapi {
    path: PathBuf,
}

impl FakeUapi {
    fn serve(name: &str, uid: u32, endpoint: &str) -> Result<Self> {
        use std::io::{BufRead, BufReader, Write};
        std::fs::create_dir_all("/var/run/wireguard")?;
        let path = PathBuf::from(format!("/var/run/wireguard/{name}.sock"));
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path)?;
        own(&path, uid)?;
        let answer = format!(
            "listen_port=51820\npublic_key={}\nendpoint={endpoint}\nallowed_ip=10.77.0.2/32\n\
             last_handshake_time_sec=0\nrx_bytes=0\ntx_bytes=0\n\
             persistent_keepalive_interval=0\nerrno=0\n\n",
            "ab".repeat(32)
        );
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\n" {
                    line.clear();
                }
                let _ = (&stream).write_all(answer.as_bytes());
            }
        });
        Ok(FakeUapi { path })
    }
}

impl Drop for FakeUapi {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn a_wireguard_socket_a_user_owns_is_not_believed() -> Result<()> {
    if !ci::lab_ready(&[]) {
        return Ok(());
    }
    let ns = Netns::new()?;
    // Names of UAPI sockets are global: unique across the host.
    let name = format!("ndwg{}", std::process::id() % 100_000);
    ns.ip(&["tuntap", "add", "dev", &name, "mode", "tun"])?;
    ns.set_up(&name)?;
    let endpoint = "192.0.2.77:51820";

    // The user's socket: the TUN device is no WireGuard tunnel, its "peers" are not read.
    let fake = FakeUapi::serve(&name, USER, endpoint)?;
    let d = diagnose(&ns, &name)?;
    ensure!(
        d.str("/kind")? != "wireguard" && d.fact("peers").as_array().is_some_and(Vec::is_empty),
        "a socket owned by uid {USER} was believed: {}",
        d.describe()
    );
    drop(fake);

    // The twin: the same answer from root's socket is a WireGuard tunnel with that peer.
    let _fake = FakeUapi::serve(&name, 0, endpoint)?;
    let d = diagnose(&ns, &name)?;
    ensure!(d.str("/kind")? == "wireguard", "{}", d.describe());
    ensure!(
        d.fact("peers").to_string().contains(endpoint),
        "root's socket was not read: {}",
        d.describe()
    );
    Ok(())
}
