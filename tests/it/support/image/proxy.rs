//! A counting plain-HTTP proxy: forwards every connection to a registry and records the
//! request line (`METHOD PATH`) of each request the client sends. The clients under test send
//! only bodiless requests (GET, HEAD), so requests are split at the blank line after their
//! headers.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The proxy; it runs until its runtime stops.
pub struct CountingProxy {
    /// `127.0.0.1:PORT` to use instead of the registry's address.
    pub host: String,
    requests: Arc<Mutex<Vec<String>>>,
    _runtime: tokio::runtime::Runtime,
}

impl CountingProxy {
    /// Starts a proxy to `upstream` (`HOST:PORT`).
    pub fn start(upstream: &str) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let upstream = upstream.to_string();
        let seen = requests.clone();
        runtime.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        serve(client, server, seen).await;
                    }
                });
            }
        });
        Self {
            host,
            requests,
            _runtime: runtime,
        }
    }

    /// The request lines seen so far, and clears them.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

async fn serve(client: TcpStream, server: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async move {
        let mut pending = Vec::new();
        let mut buf = vec![0u8; 16 << 10];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            pending.extend_from_slice(&buf[..n]);
            while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&pending[..end]).into_owned();
                if let Some(line) = head.lines().next() {
                    let mut parts = line.split(' ');
                    let method = parts.next().unwrap_or_default();
                    let path = parts.next().unwrap_or_default();
                    seen.lock().unwrap().push(format!("{method} {path}"));
                }
                pending.drain(..end + 4);
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = sw.shutdown().await;
    };
    let down = async move {
        let _ = tokio::io::copy(&mut sr, &mut cw).await;
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}
