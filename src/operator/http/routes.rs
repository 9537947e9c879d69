//! The answer to one request: the path, the method, and for `/metrics` the access decision.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use rustls::pki_types::CertificateDer;

use super::{Access, Decision, Health, METRICS_CONTENT_TYPE, Metrics};

/// What every request of a server sees.
#[derive(Debug)]
pub(super) struct Context {
    pub(super) metrics: Arc<Metrics>,
    pub(super) health: Arc<Health>,
    /// `None`: plain HTTP, no authentication.
    pub(super) access: Option<Arc<Access>>,
}

/// The response to `request`, on a connection whose client presented `chain`.
pub(super) async fn answer<B>(
    request: &Request<B>,
    context: &Context,
    chain: Option<&[CertificateDer<'static>]>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    if !matches!(path, "/metrics" | "/healthz" | "/readyz") {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match path {
        "/metrics" => metrics(request, context, chain).await,
        "/healthz" if context.health.is_alive() => text(StatusCode::OK, "ok"),
        "/healthz" => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "no progress for {}s\n",
                context.health.quiet_for().as_secs()
            ),
        ),
        _ if context.health.is_ready() => text(StatusCode::OK, "ok"),
        _ => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
    }
}

async fn metrics<B>(
    request: &Request<B>,
    context: &Context,
    chain: Option<&[CertificateDer<'static>]>,
) -> Response<Full<Bytes>> {
    if let Some(access) = &context.access {
        let authorization = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        match access.decide(authorization, chain).await {
            Decision::Allowed { user } => tracing::trace!("/metrics for {user}"),
            Decision::Unauthenticated(why) => {
                tracing::debug!("/metrics: 401: {why}");
                let mut r = text(StatusCode::UNAUTHORIZED, format!("unauthorized: {why}\n"));
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"minicvo\""),
                );
                return r;
            }
            Decision::Forbidden { user } => {
                tracing::debug!("/metrics: 403 for {user}");
                return text(
                    StatusCode::FORBIDDEN,
                    format!("forbidden: user {user:?} cannot get path \"/metrics\"\n"),
                );
            }
            Decision::Failed(why) => {
                return text(StatusCode::INTERNAL_SERVER_ERROR, format!("{why}\n"));
            }
        }
    }
    let mut r = Response::new(Full::new(Bytes::from(context.metrics.render())));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(METRICS_CONTENT_TYPE),
    );
    r
}

/// A plain-text response.
fn text(status: StatusCode, body: impl Into<String>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.into())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
