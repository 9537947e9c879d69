//! Connecting to a cluster the way kubectl does, with every HTTP request counted.
//!
//! Kubeconfig resolution follows kubectl:
//!
//! 1. `--kubeconfig FILE`: only that file, no merging;
//! 2. otherwise `$KUBECONFIG`, a path list merged first-wins;
//! 3. otherwise `~/.kube/config`;
//! 4. otherwise the in-cluster service account.
//!
//! `--context` picks a context of the kubeconfig (the current context by default).
//!
//! kube's own retry layer is switched off: the executor retries with its own bounded policy
//! ([`super::retry`]) and reports each retry as an event, so one logical call is one HTTP
//! request and [`RequestCounter`] counts what the API server really saw.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A kubeconfig file (or the `KUBECONFIG` list) could not be read or parsed.
    #[error("cannot read kubeconfig {source_name}: {source}")]
    Kubeconfig {
        /// The file, or `$KUBECONFIG`.
        source_name: String,
        /// The underlying error.
        #[source]
        source: KubeconfigError,
    },
    /// The kubeconfig was read, but the context could not be turned into a client config.
    #[error("cannot use {what} of kubeconfig {source_name}: {source}")]
    Context {
        /// `context "name"` or `the current context`.
        what: String,
        /// Where the kubeconfig came from.
        source_name: String,
        /// The underlying error.
        #[source]
        source: KubeconfigError,
    },
    /// No kubeconfig anywhere and not running inside a cluster.
    #[error(
        "no kubeconfig found (no --kubeconfig, KUBECONFIG unset, no {default}) and not running \
         in a cluster: {in_cluster}\nhint: pass --kubeconfig FILE or set KUBECONFIG"
    )]
    NoConfig {
        /// The default path that was tried.
        default: String,
        /// Why the in-cluster config failed.
        in_cluster: String,
    },
    /// `--context` was given but only the in-cluster config is available.
    #[error(
        "--context {0:?} given, but no kubeconfig was found (in-cluster config has no contexts)"
    )]
    ContextWithoutKubeconfig(String),
    /// The client could not be built from the config (e.g. bad TLS material).
    #[error("cannot build a client for {server}: {source}")]
    Client {
        /// The API server URL.
        server: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },
}

/// A shared count of the HTTP requests a client sent (every attempt, watches included).
#[derive(Debug, Clone, Default)]
pub struct RequestCounter(Arc<AtomicU64>);

impl RequestCounter {
    /// A counter at zero.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests sent so far.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A tower layer that counts requests into a [`RequestCounter`].
#[derive(Debug, Clone)]
pub struct CountLayer(pub RequestCounter);

impl<S> tower::Layer<S> for CountLayer {
    type Service = CountService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        CountService {
            inner,
            counter: self.0.clone(),
        }
    }
}

/// The service made by [`CountLayer`].
#[derive(Debug, Clone)]
pub struct CountService<S> {
    inner: S,
    counter: RequestCounter,
}

impl<S, B> tower::Service<http::Request<B>> for CountService<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        self.counter.add();
        self.inner.call(req)
    }
}

/// A client together with its request counter and where it points.
#[derive(Clone)]
pub struct Connection {
    /// The client (kube's retry layer off, request counting on).
    pub client: Client,
    /// Requests sent through [`Connection::client`].
    pub requests: RequestCounter,
    /// The API server URL.
    pub server: String,
    /// The kubeconfig context in use (`None` for the in-cluster config).
    pub context: Option<String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .field("context", &self.context)
            .field("requests", &self.requests.get())
            .finish_non_exhaustive()
    }
}

/// Connects as kubectl would (see the module docs) and returns the bare client.
///
/// # Errors
/// [`ConnectError`] when no usable kubeconfig or in-cluster config is found.
pub async fn connect_client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ConnectError> {
    Ok(connect(kubeconfig, context).await?.client)
}

/// Connects as kubectl would (see the module docs).
///
/// # Errors
/// [`ConnectError`] when no usable kubeconfig or in-cluster config is found.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Connection, ConnectError> {
    connect_with(kubeconfig, context, false).await
}

/// Connects as [`connect`] does; `insecure_skip_tls_verify` turns off the verification of the
/// API server's certificate, as kubectl's flag of that name does. Whenever verification is off
/// (by this flag or by `insecure-skip-tls-verify` in the kubeconfig), a warning is logged.
///
/// # Errors
/// As [`connect`].
pub async fn connect_with(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    insecure_skip_tls_verify: bool,
) -> Result<Connection, ConnectError> {
    let (kc, source_name) = match kubeconfig {
        Some(path) => (
            Some(
                Kubeconfig::read_from(path).map_err(|source| ConnectError::Kubeconfig {
                    source_name: path.display().to_string(),
                    source,
                })?,
            ),
            path.display().to_string(),
        ),
        None => match Kubeconfig::from_env() {
            Err(source) => {
                return Err(ConnectError::Kubeconfig {
                    source_name: "$KUBECONFIG".into(),
                    source,
                });
            }
            Ok(Some(kc)) => (Some(kc), "$KUBECONFIG".to_string()),
            Ok(None) => match default_path().filter(|p| p.exists()) {
                Some(path) => (
                    Some(Kubeconfig::read_from(&path).map_err(|source| {
                        ConnectError::Kubeconfig {
                            source_name: path.display().to_string(),
                            source,
                        }
                    })?),
                    path.display().to_string(),
                ),
                None => (None, String::new()),
            },
        },
    };
    let (config, context_name) = match kc {
        Some(kc) => {
            let name = context
                .map(str::to_owned)
                .or_else(|| kc.current_context.clone());
            let options = KubeConfigOptions {
                context: context.map(str::to_owned),
                ..KubeConfigOptions::default()
            };
            let config = Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|source| ConnectError::Context {
                    what: context.map_or_else(
                        || "the current context".to_string(),
                        |c| format!("context {c:?}"),
                    ),
                    source_name,
                    source,
                })?;
            (config, name)
        }
        None => {
            if let Some(c) = context {
                return Err(ConnectError::ContextWithoutKubeconfig(c.to_string()));
            }
            let config = Config::incluster().map_err(|e| ConnectError::NoConfig {
                default: default_path()
                    .map_or_else(|| "~/.kube/config".into(), |p| p.display().to_string()),
                in_cluster: e.to_string(),
            })?;
            (config, None)
        }
    };
    let mut config = config;
    if insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
    }
    let mut connection = from_config(config)?;
    connection.context = context_name;
    Ok(connection)
}

/// Builds a counted client from a ready [`Config`] (kube's own retries switched off).
///
/// # Errors
/// [`ConnectError::Client`] when the config cannot make a client.
pub fn from_config(mut config: Config) -> Result<Connection, ConnectError> {
    config.default_retry = false;
    let server = config.cluster_url.to_string();
    if config.accept_invalid_certs {
        tracing::warn!(
            "TLS verification is off (--insecure-skip-tls-verify or insecure-skip-tls-verify in \
             the kubeconfig): {server} is not authenticated, and whoever is in between can read \
             the credentials and every object sent"
        );
    }
    let requests = RequestCounter::new();
    let client = ClientBuilder::try_from(config)
        .map_err(|source| ConnectError::Client {
            server: server.clone(),
            source,
        })?
        .with_layer(&CountLayer(requests.clone()))
        .build();
    Ok(Connection {
        client,
        requests,
        server,
        context: None,
    })
}

fn default_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = r"
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    token: abc
contexts:
- name: one
  context: {cluster: c, user: u}
- name: two
  context: {cluster: c, user: u, namespace: elsewhere}
current-context: one
";

    #[tokio::test]
    async fn explicit_file_and_context_are_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, KUBECONFIG).unwrap();
        let c = connect(Some(&path), None).await.unwrap();
        assert_eq!(c.context.as_deref(), Some("one"));
        assert_eq!(c.server, "https://127.0.0.1:6443/");
        assert_eq!(c.client.default_namespace(), "default");
        let c = connect(Some(&path), Some("two")).await.unwrap();
        assert_eq!(c.context.as_deref(), Some("two"));
        assert_eq!(c.client.default_namespace(), "elsewhere");
        assert_eq!(c.requests.get(), 0);
    }

    #[tokio::test]
    async fn unknown_context_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, KUBECONFIG).unwrap();
        let err = connect(Some(&path), Some("nope")).await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("context \"nope\""), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
    }

    #[tokio::test]
    async fn missing_file_is_an_error_naming_it() {
        let err = connect(Some(Path::new("/nonexistent/kubeconfig")), None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }
}
