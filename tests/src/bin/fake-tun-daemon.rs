//! A stand-in for a TUN/TAP daemon (tinc, fastd) that an unprivileged user controls, for
//! the tests proving netdoctor never runs such a program and never reads its files.
//!
//! `fake-tun-daemon IFNAME [--drop-to UID] [ARGS...]` attaches to TAP device IFNAME (as
//! the real daemons do), optionally gives up root for UID, and waits to be killed. ARGS
//! (e.g. `--config FILE`) only show in its command line.
//!
//! With `--serve-localapi PATH` it also stands in for tailscaled's LocalAPI: once running
//! as UID, it listens on unix socket PATH and answers `/localapi/v0/status` with one peer
//! whose host name is `fake-peer`, anything else with an empty DERP map.
//!
//! `fake-tun-daemon --version` is what netdoctor must never run: it leaves a file named
//! after its own binary plus `.ran` and answers like tinc 1.1.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--version") {
        if let Ok(exe) = std::env::current_exe() {
            let mut marker = exe.into_os_string();
            marker.push(".ran");
            let _ = std::fs::write(marker, format!("run as uid {}\n", nix::unistd::getuid()));
        }
        println!("tinc version 1.1pre18");
        return;
    }
    let Some(ifname) = args.first() else {
        eprintln!("usage: fake-tun-daemon IFNAME [--drop-to UID] [ARGS...]");
        std::process::exit(2);
    };
    let fd = match attach_tap(ifname) {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("fake-tun-daemon: attaching to {ifname}: {e}");
            std::process::exit(1);
        }
    };
    if let Some(uid) = args
        .iter()
        .position(|a| a == "--drop-to")
        .and_then(|i| args.get(i + 1))
        .and_then(|u| u.parse::<u32>().ok())
    {
        let id = nix::unistd::Uid::from_raw(uid);
        let gid = nix::unistd::Gid::from_raw(uid);
        if let Err(e) = nix::unistd::setgroups(&[])
            .and_then(|()| nix::unistd::setgid(gid))
            .and_then(|()| nix::unistd::setuid(id))
        {
            eprintln!("fake-tun-daemon: dropping to uid {uid}: {e}");
            std::process::exit(1);
        }
    }
    if let Some(path) = args
        .iter()
        .position(|a| a == "--serve-localapi")
        .and_then(|i| args.get(i + 1))
    {
        if let Err(e) = serve_localapi(path) {
            eprintln!("fake-tun-daemon: listening on {path}: {e}");
            std::process::exit(1);
        }
    }
    let _ = writeln!(std::io::stdout(), "attached to {ifname}");
    let _keep = fd;
    loop {
        std::thread::park();
    }
}

/// Opens `/dev/net/tun` and attaches it to TAP device `ifname` (TUNSETIFF).
fn attach_tap(ifname: &str) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, OwnedFd};
    const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    let fd: OwnedFd = file.into();
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let name = ifname.as_bytes();
    if name.len() >= req.ifr_name.len() {
        return Err(std::io::Error::other("interface name too long"));
    }
    for (dst, src) in req.ifr_name.iter_mut().zip(name) {
        *dst = *src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: fd is an open /dev/net/tun; req lives across the call and is an ifreq.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// Listens on `path` and answers LocalAPI requests in a thread (see the module's comment).
fn serve_localapi(path: &str) -> std::io::Result<()> {
    use std::io::Read;
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    let status = format!(
        r#"{{"BackendState":"Running","Self":{{"Relay":"x"}},"Peer":{{"nodekey:{k}":{{"PublicKey":"nodekey:{k}","HostName":"fake-peer","Relay":"x","RxBytes":1,"TxBytes":2}}}}}}"#,
        k = "ab".repeat(32)
    );
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 2048];
            let n = stream.read(&mut buf).unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]);
            let body = if request.contains("/localapi/v0/status") {
                status.as_str()
            } else {
                r#"{"Regions":{}}"#
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Ok(())
}
