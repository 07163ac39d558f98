//! Short-lived connections inside the window are reported as closed, with their
//! duration.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdoctor_lab::netdoctor::Watch;
use netdoctor_lab::{lab_guard, Netns, PairTopology};

use crate::sockets_drops::helpers::{enter, ip, join};
use crate::sockets_drops::rows::{assert_only_local, describe_rows, row_for, rows};

const SHORT_PORT: u16 = 7000;
const SHORT_CONNS: usize = 6;
const SHORT_PAYLOAD: usize = 20_000;

/// Accepts `n` connections in `ns`: reads each to EOF, answers "ok", closes.
fn short_server(ns: &Netns, ready: &mpsc::Sender<()>, n: usize) -> Result<()> {
    enter(ns)?;
    let listener = TcpListener::bind((PairTopology::B_IP, SHORT_PORT))?;
    listener.set_nonblocking(true)?;
    ready.send(()).context("test thread gone")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut served = 0;
    while served < n {
        match listener.accept() {
            Ok((mut conn, _)) => {
                conn.set_nonblocking(false)?;
                conn.set_read_timeout(Some(Duration::from_secs(10)))?;
                let mut buf = Vec::new();
                conn.read_to_end(&mut buf)?;
                ensure!(buf.len() == SHORT_PAYLOAD, "got {} bytes", buf.len());
                conn.write_all(b"ok")?;
                served += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                ensure!(
                    Instant::now() < deadline,
                    "only {served} of {n} connections"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Opens and closes `n` connections from `ns`; returns their local addresses.
fn short_clients(ns: &Netns, n: usize) -> Result<Vec<SocketAddr>> {
    enter(ns)?;
    let server: SocketAddr = SocketAddr::new(ip(PairTopology::B_IP)?, SHORT_PORT);
    let payload = vec![0x5a_u8; SHORT_PAYLOAD];
    let mut locals = Vec::new();
    for _ in 0..n {
        let mut conn = TcpStream::connect_timeout(&server, Duration::from_secs(5))?;
        conn.set_read_timeout(Some(Duration::from_secs(10)))?;
        locals.push(conn.local_addr()?);
        conn.write_all(&payload)?;
        conn.shutdown(Shutdown::Write)?;
        let mut answer = Vec::new();
        conn.read_to_end(&mut answer)?;
        ensure!(answer == b"ok", "answer {answer:?}");
    }
    Ok(locals)
}

#[test]
fn short_lived_connections_are_reported_closed() -> Result<()> {
    lab_guard!();
    let pair = PairTopology::new(1500)?;
    let watch = Watch::start(
        &pair.a,
        &["flows", PairTopology::IFNAME, "--duration", "60s", "--json"],
    )?;
    let started = Instant::now();
    let locals = std::thread::scope(|s| -> Result<Vec<SocketAddr>> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let b = &pair.b;
        let server = s.spawn(move || short_server(b, &ready_tx, SHORT_CONNS));
        if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
            join(server, "short server")?;
            bail!("server never listened");
        }
        let clients = s.spawn(|| short_clients(&pair.a, SHORT_CONNS));
        let locals = join(clients, "short clients");
        join(server, "short server")?;
        locals
    })?;
    let elapsed = started.elapsed();
    let report = watch.interrupt()?;
    let rows = rows(&report)?;
    println!(
        "{SHORT_CONNS} connections in {elapsed:?}: {locals:?}\n{}",
        describe_rows(&rows)
    );
    assert_only_local(&rows, PairTopology::A_IP)?;
    let default_cc = pair.a.read_sysctl("net.ipv4.tcp_congestion_control")?;
    let server = SocketAddr::new(ip(PairTopology::B_IP)?, SHORT_PORT);
    for local in &locals {
        let row = row_for(&rows, *local)?;
        assert!(row.closed, "{}", row.describe());
        assert_eq!(row.remote, server, "{}", row.describe());
        assert_eq!(row.cc, default_cc, "{}", row.describe());
        assert!(
            row.bytes_acked >= SHORT_PAYLOAD as u64
                && row.data_segs_sent >= (SHORT_PAYLOAD as u64).div_ceil(1448),
            "{}",
            row.describe()
        );
        let lived = row.duration_ms.with_context(|| {
            format!(
                "no duration for a connection opened in the window: {}",
                row.describe()
            )
        })?;
        assert!(
            lived <= u64::try_from(elapsed.as_millis())?,
            "lived {lived} ms, longer than the whole exchange {elapsed:?}: {}",
            row.describe()
        );
    }
    Ok(())
}
