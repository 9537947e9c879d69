//! One HTTP request to the API server, with what the typed kube API hides: the status code
//! (201 tells a server-side apply that created the object from one that updated it), the
//! `Date` header (the server's clock, for classifying changes) and `Warning` headers.

use std::time::Duration;

use http_body_util::BodyExt as _;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::client::Body;
use serde_json::Value;

/// A failed request, in the terms the retry policy and the error messages need.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The API server answered with an error status.
    #[error("{}", api_message(*code, reason, message))]
    Api {
        /// HTTP status code.
        code: u16,
        /// The `Status` reason (`Forbidden`, `Invalid`, `NotFound`, ...), may be empty.
        reason: String,
        /// The `Status` message, or the body when it was not a `Status`.
        message: String,
        /// `Retry-After` (header or `details.retryAfterSeconds`).
        retry_after: Option<Duration>,
        /// The `Status` details: the object the error is about, when the server names it.
        details: Option<Box<StatusDetails>>,
    },
    /// No answer within the request timeout.
    #[error("request timed out after {0:?}")]
    Timeout(Duration),
    /// The connection failed or broke (refused, reset, TLS, ...).
    #[error("connection error: {0}")]
    Transport(String),
    /// The answer could not be decoded.
    #[error("cannot decode the response: {0}")]
    Decode(String),
    /// The request could not be built (a bug or an impossible name).
    #[error("cannot build the request: {0}")]
    Build(String),
}

/// The object a `Status` error is about (its `details`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusDetails {
    /// The resource (plural, `namespaces`) or kind the server names.
    pub kind: String,
    /// The group, empty for the core group.
    pub group: String,
    /// The object's name.
    pub name: String,
}

fn api_message(code: u16, reason: &str, message: &str) -> String {
    let message = message.trim();
    match (message.is_empty(), reason.is_empty()) {
        (true, true) => format!("HTTP {code}"),
        (true, false) => format!("{reason} (HTTP {code})"),
        (false, true) => format!("{message} (HTTP {code})"),
        (false, false) => format!("{message} ({code} {reason})"),
    }
}

impl RequestError {
    /// The HTTP status code of an API error.
    #[must_use]
    pub fn code(&self) -> Option<u16> {
        match self {
            RequestError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether this is an API error with this code.
    #[must_use]
    pub fn is(&self, code: u16) -> bool {
        self.code() == Some(code)
    }

    /// The namespace this error says does not exist: a 404 `NotFound` whose details name a
    /// `namespaces` object (what the server answers for an object in a missing namespace).
    #[must_use]
    pub fn missing_namespace(&self) -> Option<&str> {
        match self {
            RequestError::Api {
                code: 404,
                details: Some(d),
                ..
            } if d.kind == "namespaces" && d.group.is_empty() && !d.name.is_empty() => {
                Some(&d.name)
            }
            _ => None,
        }
    }

    /// Converts a kube client error (from kube's own helpers such as discovery).
    #[must_use]
    pub fn from_kube(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => RequestError::Api {
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
                retry_after: None,
                details: None,
            },
            kube::Error::SerdeError(e) => RequestError::Decode(e.to_string()),
            kube::Error::FromUtf8(e) => RequestError::Decode(e.to_string()),
            kube::Error::BuildRequest(e) => RequestError::Build(e.to_string()),
            kube::Error::HttpError(e) => RequestError::Build(e.to_string()),
            other => RequestError::Transport(error_chain(&other)),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

/// A successful answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// HTTP status code (200, 201, 202).
    pub status: u16,
    /// The server's `Date`, when sent and parseable.
    pub date: Option<Timestamp>,
    /// The texts of `Warning` headers.
    pub warnings: Vec<String>,
    /// The JSON body (`Value::Null` when empty).
    pub body: Value,
}

/// Sends one request and reads the whole answer, within `timeout`.
///
/// # Errors
/// [`RequestError`] for error statuses, transport failures, timeouts and bad bodies.
pub async fn send(
    client: &Client,
    request: http::Request<Vec<u8>>,
    timeout: Duration,
) -> Result<Response, RequestError> {
    match tokio::time::timeout(timeout, send_inner(client, request)).await {
        Ok(r) => r,
        Err(_) => Err(RequestError::Timeout(timeout)),
    }
}

async fn send_inner(
    client: &Client,
    request: http::Request<Vec<u8>>,
) -> Result<Response, RequestError> {
    let response = client
        .send(request.map(Body::from))
        .await
        .map_err(RequestError::from_kube)?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(RequestError::from_kube)?
        .to_bytes();
    if status >= 400 {
        return Err(error_from(status, &headers, &bytes));
    }
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).map_err(|e| RequestError::Decode(e.to_string()))?
    };
    Ok(Response {
        status,
        date: headers
            .get(http::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_http_date),
        warnings: headers
            .get_all(http::header::WARNING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(warning_text)
            .collect(),
        body,
    })
}

fn error_from(status: u16, headers: &http::HeaderMap, bytes: &[u8]) -> RequestError {
    let header_retry = headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) if v.get("kind").and_then(Value::as_str) == Some("Status") => {
            let details_retry = v
                .pointer("/details/retryAfterSeconds")
                .and_then(Value::as_u64)
                .map(Duration::from_secs);
            RequestError::Api {
                code: v
                    .get("code")
                    .and_then(Value::as_u64)
                    .and_then(|c| u16::try_from(c).ok())
                    .filter(|c| *c != 0)
                    .unwrap_or(status),
                reason: v
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                message: v
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                retry_after: header_retry.or(details_retry),
                details: v.get("details").map(|d| {
                    let field = |k: &str| {
                        d.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    Box::new(StatusDetails {
                        kind: field("kind"),
                        group: field("group"),
                        name: field("name"),
                    })
                }),
            }
        }
        _ => RequestError::Api {
            code: status,
            reason: String::new(),
            message: String::from_utf8_lossy(bytes)
                .trim()
                .chars()
                .take(500)
                .collect(),
            retry_after: header_retry,
            details: None,
        },
    }
}

/// Parses an HTTP `Date` (RFC 7231 IMF-fixdate, which RFC 2822 parsing accepts).
#[must_use]
pub fn parse_http_date(s: &str) -> Option<Timestamp> {
    k8s_openapi::jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(s)
        .ok()
}

/// The text of a `Warning: 299 - "text"` header.
#[must_use]
pub fn warning_text(header: &str) -> String {
    let mut parts = header.splitn(3, ' ');
    let (_code, _agent, rest) = (parts.next(), parts.next(), parts.next());
    match rest {
        Some(r) if r.starts_with('"') => {
            let inner = &r[1..];
            inner
                .rfind('"')
                .map_or(inner, |end| &inner[..end])
                .replace("\\\"", "\"")
        }
        _ => header.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_parse() {
        let t = parse_http_date("Tue, 02 Dec 2025 17:45:03 GMT").unwrap();
        assert_eq!(t.to_string(), "2025-12-02T17:45:03Z");
        assert!(parse_http_date("yesterday").is_none());
    }

    #[test]
    fn warning_headers_give_their_text() {
        assert_eq!(
            warning_text(r#"299 - "unknown field \"spec.foo\"""#),
            r#"unknown field "spec.foo""#
        );
        assert_eq!(warning_text("garbage"), "garbage");
    }

    #[test]
    fn status_bodies_become_api_errors() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps \"x\" is forbidden: User \"alice\" cannot patch resource \"configmaps\"","reason":"Forbidden","code":403}"#;
        let e = error_from(403, &http::HeaderMap::new(), body);
        assert_eq!(e.code(), Some(403));
        assert_eq!(
            e.to_string(),
            "configmaps \"x\" is forbidden: User \"alice\" cannot patch resource \"configmaps\" (403 Forbidden)"
        );
    }

    #[test]
    fn retry_after_comes_from_the_header_or_the_details() {
        let body = br#"{"kind":"Status","code":429,"reason":"TooManyRequests","message":"slow down","details":{"retryAfterSeconds":3}}"#;
        let e = error_from(429, &http::HeaderMap::new(), body);
        assert!(
            matches!(e, RequestError::Api { retry_after: Some(d), .. } if d == Duration::from_secs(3))
        );
        let mut h = http::HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, "7".parse().unwrap());
        let e = error_from(429, &h, b"too many requests");
        assert!(
            matches!(e, RequestError::Api { retry_after: Some(d), ref message, .. } if d == Duration::from_secs(7) && message == "too many requests")
        );
    }
}
