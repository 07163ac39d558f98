//! A stand-in for a userspace WireGuard's UAPI socket, for the tests proving netdoctor
//! believes only root's and reads it within a deadline and bounds.
//!
//! `fake-uapi PATH MODE [--drop-to UID] [--endpoint ADDR:PORT]` gives up root for UID (and
//! its group) if asked, then listens on unix socket PATH (so `SO_PEERCRED` names UID),
//! prints `listening`, and answers every `get=1` request as MODE says:
//!
//! - `answer`: at once, one peer whose endpoint is ADDR:PORT (192.0.2.77:51820 by
//!   default), as wireguard-go does;
//! - `dribble`: one line a second, never the blank line that ends an answer;
//! - `slow-after-first`: the first request as `answer`, every later one as `dribble`;
//! - `endless`: peers, as fast as the reader takes them, forever.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(mode)) = (args.first(), args.get(1)) else {
        eprintln!("usage: fake-uapi PATH answer|dribble|slow-after-first|endless [--drop-to UID] [--endpoint ADDR:PORT]");
        std::process::exit(2);
    };
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if let Some(uid) = flag("--drop-to").and_then(|u| u.parse::<u32>().ok()) {
        if let Err(e) = nix::unistd::setgroups(&[])
            .and_then(|()| nix::unistd::setgid(nix::unistd::Gid::from_raw(uid)))
            .and_then(|()| nix::unistd::setuid(nix::unistd::Uid::from_raw(uid)))
        {
            eprintln!("fake-uapi: dropping to uid {uid}: {e}");
            std::process::exit(1);
        }
    }
    let endpoint = flag("--endpoint").unwrap_or_else(|| "192.0.2.77:51820".to_owned());
    let listener = match UnixListener::bind(path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("fake-uapi: listening on {path}: {e}");
            std::process::exit(1);
        }
    };
    println!("listening");
    let _ = std::io::stdout().flush();
    for (n, stream) in listener.incoming().flatten().enumerate() {
        let mode = match (mode.as_str(), n) {
            ("slow-after-first", 0) => "answer".to_owned(),
            ("slow-after-first", _) => "dribble".to_owned(),
            (m, _) => m.to_owned(),
        };
        let endpoint = endpoint.clone();
        std::thread::spawn(move || {
            let _ = serve(&stream, &mode, &endpoint);
        });
    }
}

/// One peer, as wireguard-go lists it.
fn peer(endpoint: &str) -> String {
    format!(
        "public_key={}\nendpoint={endpoint}\nallowed_ip=10.77.0.2/32\n\
         last_handshake_time_sec=0\nrx_bytes=0\ntx_bytes=0\npersistent_keepalive_interval=0\n",
        "ab".repeat(32)
    )
}

/// Reads one request (up to its blank line) and answers it as `mode` says, until the
/// client leaves.
fn serve(stream: &UnixStream, mode: &str, endpoint: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while reader.read_line(&mut line)? > 0 && line != "\n" {
        line.clear();
    }
    let mut w = stream;
    match mode {
        "answer" => write!(w, "listen_port=51820\n{}errno=0\n\n", peer(endpoint)),
        "dribble" => {
            w.write_all(b"listen_port=51820\n")?;
            loop {
                std::thread::sleep(Duration::from_secs(1));
                w.write_all(b"fwmark=0\n")?;
            }
        }
        "endless" => {
            let many = peer(endpoint).repeat(1000);
            loop {
                w.write_all(many.as_bytes())?;
            }
        }
        other => {
            eprintln!("fake-uapi: unknown mode {other}");
            std::process::exit(2);
        }
    }
}
