//! One request to the update service: `GET upstream?arch=&channel=&id=&version=` with
//! `Accept: application/json`, the query parameters added to the upstream's own and sorted by
//! name (Go's `url.Values.Encode`), as the CVO's `cincinnati.Client` sends it. The body is read
//! in chunks and given up past [`MAX_BODY_BYTES`]; the whole request is bounded by a timeout.
//!
//! Failures carry the CVO's reasons: `InvalidRequest` (no URL to send to), `RemoteFailed` (no
//! answer: refused, unreachable, timed out), `ResponseFailed` (a status other than 200, a body
//! that breaks off or is too large).

use std::time::{Duration, Instant};

use crate::update_graph::cincinnati::{GraphError, MAX_BODY_BYTES};
use crate::update_graph::status::Query;

/// A graph body and what it cost.
#[derive(Debug)]
pub struct Fetched {
    /// The URL asked.
    pub url: String,
    /// The body.
    pub body: Vec<u8>,
    /// From the request to the last byte.
    pub elapsed: Duration,
}

/// The URL of `query` (the CVO's: upstream's parameters and ours, sorted by name).
///
/// # Errors
/// `InvalidRequest` when the upstream is not a URL.
pub fn url(query: &Query) -> Result<reqwest::Url, GraphError> {
    let mut url = reqwest::Url::parse(&query.upstream)
        .map_err(|e| GraphError::new("InvalidRequest", e.to_string()))?;
    let mut pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    pairs.extend([
        ("arch".to_string(), query.arch.clone()),
        ("channel".to_string(), query.channel.clone()),
        ("id".to_string(), query.id.clone()),
        ("version".to_string(), query.version.to_string()),
    ]);
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    url.query_pairs_mut().clear().extend_pairs(pairs);
    Ok(url)
}

/// Error text with its causes (`reqwest` puts the useful part in the sources).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !parts.contains(&text) {
            parts.push(text);
        }
        next = s.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

/// Fetches the graph of `query`, giving up after `timeout`.
///
/// # Errors
/// [`GraphError`] with the CVO's reasons (module doc).
pub async fn fetch(query: &Query, timeout: Duration) -> Result<Fetched, GraphError> {
    let url = url(query)?;
    // https upstreams: the same TLS stack as the registry client (installed once per process).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .user_agent(concat!("minicvo/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| GraphError::new("InvalidRequest", chain(&e)))?;
    let started = Instant::now();
    let shown = url.to_string();
    let remote = |e: &reqwest::Error| {
        let why = if e.is_timeout() {
            format!("no answer within {timeout:?}")
        } else {
            chain(e)
        };
        GraphError::new("RemoteFailed", format!("Get {shown:?}: {why}"))
    };
    let mut response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| remote(&e))?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        return Err(GraphError::new(
            "ResponseFailed",
            format!("unexpected HTTP status: {status}"),
        ));
    }
    let too_large = || {
        GraphError::new(
            "ResponseFailed",
            format!(
                "the graph is larger than {} MiB",
                MAX_BODY_BYTES / (1024 * 1024)
            ),
        )
    };
    if response
        .content_length()
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                let why = if e.is_timeout() {
                    format!("the body did not arrive within {timeout:?}")
                } else {
                    chain(&e)
                };
                return Err(GraphError::new("ResponseFailed", why));
            }
        }
    }
    Ok(Fetched {
        url: shown,
        body,
        elapsed: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_the_cvos() {
        let q = Query {
            upstream: "https://updates.example/graph?b=1&z=2".into(),
            channel: "stable-4.14".into(),
            id: "1d3c4a27-6a4f-4b2b-9c1e-2b3f5d1c0a9e".into(),
            arch: "amd64".into(),
            version: semver::Version::new(4, 13, 0),
            to_multi: false,
        };
        assert_eq!(
            url(&q).unwrap().as_str(),
            "https://updates.example/graph?arch=amd64&b=1&channel=stable-4.14&id=1d3c4a27-6a4f-4b2b-9c1e-2b3f5d1c0a9e&version=4.13.0&z=2"
        );
    }
}
