//! tailscaled's LocalAPI: HTTP/1.1 over its unix socket (hyper), asked only when root or
//! netdoctor's own user owns the socket and the process listening on it.
//!
//! The requests are those of tailscale's own client (`client/local`): `GET /localapi/v0/…`
//! with `Host: local-tailscaled.sock`; tailscaled refuses requests with another host, a
//! `Referer` or an `Origin`.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;

use super::Error;
use crate::config::trusted::{self, trusted_uid};

/// The host name tailscale's client sends (`client/tailscale/apitype.LocalAPIHost`).
const LOCALAPI_HOST: &str = "local-tailscaled.sock";

/// tailscaled answers from memory; a daemon that takes longer is stuck.
const TIMEOUT: Duration = Duration::from_secs(3);

/// The status document grows with the tailnet (about 2 KiB per peer).
const MAX_BODY: usize = 32 << 20;

/// `path` if it is a socket that root (or this process's user) owns: another user could
/// listen there and answer with peers of their choosing.
pub fn trusted_socket(path: &Path) -> Result<PathBuf, Error> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::Io(path.to_owned(), e))?;
    if !meta.file_type().is_socket() {
        return Err(Error::NotASocket(path.to_owned()));
    }
    if !trusted_uid(meta.uid()) {
        return Err(Error::Untrusted(path.to_owned(), meta.uid()));
    }
    Ok(path.to_owned())
}

/// Connects to the trusted socket at `path` and checks who listens on it (SO_PEERCRED,
/// [`trusted::check_listener`]): the file checked before connecting may have been replaced
/// in between by a user who can write to its directory, so the listener must be root's
/// (or this user's) too, by every uid of its process.
async fn connect(path: &Path) -> Result<tokio::net::UnixStream, Error> {
    let socket = trusted_socket(path)?;
    let stream = tokio::net::UnixStream::connect(&socket)
        .await
        .map_err(|e| Error::Io(socket.clone(), e))?;
    let listener = stream
        .peer_cred()
        .map_err(|e| Error::Io(socket.clone(), e))?;
    trusted::check_listener(listener.uid(), listener.pid())
        .map_err(|why| Error::UntrustedListener(socket, why))?;
    Ok(stream)
}

/// `GET /localapi/v0/{what}` on the socket at `socket`, its JSON body decoded.
pub async fn get<T: DeserializeOwned>(socket: &Path, what: &str) -> Result<T, Error> {
    let uri = format!("/localapi/v0/{what}");
    let body = tokio::time::timeout(TIMEOUT, fetch(socket, &uri))
        .await
        .map_err(|_| Error::Timeout(uri.clone(), TIMEOUT))??;
    serde_json::from_slice(&body).map_err(|e| Error::Json(uri, e))
}

async fn fetch(socket: &Path, uri: &str) -> Result<Bytes, Error> {
    let http = |e: &dyn std::fmt::Display| Error::Http(uri.to_owned(), e.to_string());
    let stream = connect(socket).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| http(&e))?;
    let driver = tokio::spawn(connection);
    let request = hyper::Request::get(uri)
        .header(hyper::header::HOST, LOCALAPI_HOST)
        .body(Empty::<Bytes>::new())
        .map_err(|e| http(&e))?;
    let answer = async {
        let response = sender.send_request(request).await.map_err(|e| http(&e))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| http(&*e))?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            return Err(Error::Status(uri.to_owned(), status.as_u16(), text));
        }
        Ok(body)
    }
    .await;
    driver.abort();
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A LocalAPI stand-in on a socket of this test: what the client sends, and that it
    /// reads a JSON answer and refuses an error status.
    #[tokio::test]
    async fn asks_as_tailscales_client_does_and_decodes_the_answer() {
        use std::io::{Read, Write};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tailscaled.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let server = std::thread::spawn(move || {
            let mut requests = Vec::new();
            for answer in [
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"TUN\":true}",
                "HTTP/1.1 403 Forbidden\r\nContent-Length: 24\r\n\r\ninvalid localapi request",
            ] {
                let (mut conn, _) = listener.accept().expect("accept");
                let mut buf = vec![0u8; 4096];
                let n = conn.read(&mut buf).expect("read");
                requests.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                conn.write_all(answer.as_bytes()).expect("write");
            }
            requests
        });
        #[derive(serde::Deserialize)]
        struct Answer {
            #[serde(rename = "TUN")]
            tun: bool,
        }
        let a: Answer = get(&path, "status?peers=true").await.expect("answer");
        assert!(a.tun);
        let e = get::<Answer>(&path, "status")
            .await
            .err()
            .expect("403 is an error");
        assert!(e.to_string().contains("403"), "{e}");
        let requests = server.join().expect("server");
        let first = requests[0].to_lowercase();
        assert!(
            first.starts_with("get /localapi/v0/status?peers=true http/1.1\r\n"),
            "{first}"
        );
        assert!(first.contains("host: local-tailscaled.sock\r\n"), "{first}");
        assert!(!first.contains("origin:") && !first.contains("referer:"));
    }

    #[test]
    fn only_sockets_of_root_or_this_user_are_trusted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("plain");
        std::fs::write(&file, "").expect("write");
        assert!(matches!(trusted_socket(&file), Err(Error::NotASocket(_))));
        let path = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        assert_eq!(trusted_socket(&path).expect("mine"), path);
        if !crate::testing::root_or_skip("to give the socket to another user") {
            return;
        }
        nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
        let e = trusted_socket(&path).expect_err("another user's socket");
        assert!(matches!(e, Error::Untrusted(_, 65534)), "{e:?}");
    }
}
