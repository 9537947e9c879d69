//! A TCP proxy that adds network latency, for `hack/bench.sh apply` with `LATENCY_MS`: the
//! test control plane runs on loopback, where a round trip costs nothing, while a real
//! cluster is 1–20 ms away. Put this in front of the API server to measure the two tools as
//! they would run against a remote cluster.
//!
//! ```text
//! delayproxy --upstream HOST:PORT --delay-ms D
//! ```
//!
//! It listens on a free port of 127.0.0.1 and prints `listening 127.0.0.1:PORT` on stdout. Every
//! chunk of bytes is held for D/2 ms in each direction (one round trip costs D ms more), the way
//! `tc netem delay` on both ends would do it: chunks are delayed, not serialized, so bandwidth
//! is unchanged and the order of bytes is kept. TLS passes through untouched. It runs until
//! killed. A benchmark tool, not a test.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

fn usage() -> ! {
    eprintln!("usage: delayproxy --upstream HOST:PORT --delay-ms D");
    std::process::exit(2);
}

/// Moves bytes from `from` to `to`, each chunk written `one_way` after it was read.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, one_way: Duration) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + one_way, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    while let Some((due, chunk)) = rx.recv().await {
        tokio::time::sleep_until(due).await;
        if to.write_all(&chunk).await.is_err() {
            break;
        }
    }
    // The reader has ended (end of stream or error): pass the half-close on.
    let _ = to.shutdown().await;
    reader.abort();
}

async fn serve(client: TcpStream, upstream: String, one_way: Duration) {
    let Ok(server) = TcpStream::connect(&upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::join!(pipe(cr, sw, one_way), pipe(sr, cw, one_way));
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut upstream = None;
    let mut delay_ms: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--upstream" => upstream = args.next(),
            "--delay-ms" => delay_ms = args.next().and_then(|v| v.parse().ok()),
            _ => usage(),
        }
    }
    let (Some(upstream), Some(delay_ms)) = (upstream, delay_ms) else {
        usage()
    };
    let one_way = Duration::from_micros(delay_ms * 500);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("listening {}", listener.local_addr()?);
    loop {
        let (client, _) = listener.accept().await?;
        tokio::spawn(serve(client, upstream.clone(), one_way));
    }
}
