//! A real HTTP update service for the graph tests: a tokio listener on 127.0.0.1 that answers
//! every request with the status and body set last, and records what it was asked.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// One request as the service saw it.
#[derive(Debug, Clone)]
pub struct Asked {
    /// Path and query.
    pub target: String,
    /// The `Accept` header.
    pub accept: String,
}

struct State {
    /// `Some(false)`: never answer; `Some(true)`: send the head and half the body, then stall.
    stall: Option<bool>,
    status: u16,
    body: Arc<Vec<u8>>,
    asked: Vec<Asked>,
}

/// The service; stops when dropped.
pub struct UpdateService {
    /// `http://127.0.0.1:PORT/graph`.
    pub url: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for UpdateService {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Other",
    }
}

impl UpdateService {
    /// Starts a service answering 404 until [`UpdateService::serve`] is called.
    pub async fn start() -> UpdateService {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            stall: None,
            status: 404,
            body: Arc::new(Vec::new()),
            asked: Vec::new(),
        }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let state = shared.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    let target = text
                        .lines()
                        .next()
                        .and_then(|l| l.split_whitespace().nth(1))
                        .unwrap_or_default()
                        .to_string();
                    let accept = text
                        .lines()
                        .find_map(|l| {
                            l.split_once(':')
                                .filter(|(k, _)| k.eq_ignore_ascii_case("accept"))
                                .map(|(_, v)| v.trim().to_string())
                        })
                        .unwrap_or_default();
                    let (status, body, stall) = {
                        let mut s = state.lock().unwrap();
                        s.asked.push(Asked { target, accept });
                        (s.status, s.body.clone(), s.stall)
                    };
                    let hang = || tokio::time::sleep(std::time::Duration::from_secs(3600));
                    if stall == Some(false) {
                        hang().await;
                        return;
                    }
                    let head = format!(
                        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        reason(status),
                        body.len()
                    );
                    let _ = conn.write_all(head.as_bytes()).await;
                    if stall == Some(true) {
                        let _ = conn.write_all(&body[..body.len() / 2]).await;
                        hang().await;
                        return;
                    }
                    let _ = conn.write_all(&body).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        UpdateService {
            url: format!("http://127.0.0.1:{port}/graph"),
            state,
            task,
        }
    }

    /// Answers `status` with `body` from now on.
    pub fn serve(&self, status: u16, body: Vec<u8>) {
        let mut s = self.state.lock().unwrap();
        s.status = status;
        s.body = Arc::new(body);
    }

    /// From now on never answers (`body: false`), or sends the head and half the body and
    /// then stalls (`body: true`).
    pub fn stall(&self, body: bool) {
        self.state.lock().unwrap().stall = Some(body);
    }

    /// What was asked so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.state.lock().unwrap().asked.clone()
    }
}
