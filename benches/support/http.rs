//! A minimal HTTP/1.1 keep-alive client for load generators: one request
//! at a time on one connection, the response read by its Content-Length.
//! A general client spends more CPU per request than the server it
//! measures on this two-core machine; this one writes one buffer and
//! reads the reply.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub struct Connection {
    stream: TcpStream,
    host: String,
    buf: Vec<u8>,
}

impl Connection {
    /// Connects to `api` (`http://host:port`).
    pub fn open(api: &str) -> Connection {
        let host = api.strip_prefix("http://").expect("an http:// address");
        let stream = TcpStream::connect(host).expect("connects to the API");
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Connection {
            stream,
            host: host.to_string(),
            buf: Vec::with_capacity(4096),
        }
    }

    /// Sends `method path` with `token` and `body`; returns the status
    /// (the body is read and dropped).
    pub fn call(&mut self, method: &str, path: &str, token: &str, body: &str) -> u16 {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.stream
            .write_all(request.as_bytes())
            .expect("request sent");
        self.buf.clear();
        let (status, body_at, length) = loop {
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).expect("response read");
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.buf[..end]).expect("an ASCII head");
                let status = head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .expect("a status line");
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                break (status, end + 4, length);
            }
        };
        while self.buf.len() < body_at + length {
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).expect("body read");
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
        status
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
