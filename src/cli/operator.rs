//! `minicvo operator`: run as a Cluster Version Operator until stopped.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use minicvo::apply::{ApplyOptions, RunnerOptions};
use minicvo::operator::{self, Hooks, LeaderOptions, OperatorOptions, PayloadIndex, Schedule};
use tokio_util::sync::CancellationToken;

use super::UsageError;
use super::apply::parse_duration;
use super::args::{ClusterArgs, FilterArgs, ImageArgs, StrategyArg};

/// Arguments of `operator`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 stopped by SIGTERM or Ctrl-C (lease released), 1 the leader lease \
    was lost or the operator could not start, 2 usage or kubeconfig error."
)]
pub struct OperatorArgs {
    /// A payload root (with release-manifests/), or a directory of payload roots; repeatable.
    /// Payloads are found by their release-metadata version; a version not found is looked
    /// for again when it is asked for.
    #[arg(long, value_name = "DIR", required = true)]
    pub payloads: Vec<PathBuf>,
    /// The release the operator runs itself: installed when ClusterVersion asks for nothing.
    /// Default: the only version under --payloads.
    #[arg(long, value_name = "VERSION")]
    pub release: Option<String>,
    /// The image of --release, as the CVO's --release-image: a spec.desiredUpdate.image equal
    /// to it is the operator's own release, taken without signature verification or
    /// preconditions (every other image is verified); also rendered into `{{.ReleaseImage}}`.
    #[arg(long, value_name = "IMAGE", default_value = "")]
    pub release_image: String,
    /// The update service to ask for the update graph, instead of ClusterVersion
    /// spec.upstream (as the CVO's --update-service). Without it and spec.upstream, the CVO's
    /// default, https://api.openshift.com/api/upgrades_info/v1/graph, is asked once
    /// spec.channel is set.
    #[arg(long, value_name = "URL", default_value = "")]
    pub update_service: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub filters: FilterArgs,
    /// How the release images that `spec.desiredUpdate.image` names are pulled.
    #[command(flatten)]
    pub image: ImageArgs,
    /// Base reconcile interval: a pass every interval × U[1,2), chosen once per process, as
    /// the CVO does (its default, 2m); retries after failures back off from interval/16.
    #[arg(long, default_value = "2m", value_parser = parse_duration, value_name = "DURATION")]
    pub resync_interval: Duration,
    /// Use --resync-interval as it is, without the CVO's ×U[1,2) spread.
    #[arg(long)]
    pub no_resync_jitter: bool,
    /// Bound on one pass (default: the CVO's, the interval while initializing and twice it
    /// otherwise).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub pass_timeout: Option<Duration>,
    /// Run without leader election (one replica only).
    #[arg(long)]
    pub no_leader_elect: bool,
    /// Namespace of the operator: its Lease and Events (created when missing).
    #[arg(long, default_value = "openshift-cluster-version")]
    pub namespace: String,
    /// Name of the leader Lease.
    #[arg(long, default_value = "version")]
    pub lease_name: String,
    /// This replica's identity in the Lease (default: host name and a random suffix).
    #[arg(long)]
    pub identity: Option<String>,
    /// How long the lease is valid after a renewal.
    #[arg(long, default_value = "90s", value_parser = parse_duration, value_name = "DURATION")]
    pub lease_duration: Duration,
    /// A leader that could not renew for this long stops and exits.
    #[arg(long, default_value = "45s", value_parser = parse_duration, value_name = "DURATION")]
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew the lease.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub retry_period: Duration,
    /// Serve /metrics, /healthz and /readyz on this address (HOST:PORT, or PORT for
    /// 127.0.0.1:PORT), over HTTPS: /metrics only for a client certificate of the API server's
    /// client CA or a bearer token, either allowed to get /metrics (TokenReview,
    /// SubjectAccessReview); /healthz and /readyz for anyone. Off by default.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<String>,
    /// The serving certificate (PEM, leaf first) for --metrics-addr, read again when it
    /// changes. Without it and --serving-key-file, a self-signed certificate is generated at
    /// start.
    #[arg(long, value_name = "FILE", requires_all = ["metrics_addr", "serving_key_file"])]
    pub serving_cert_file: Option<PathBuf>,
    /// The private key (PEM) of --serving-cert-file, read again when it changes.
    #[arg(long, value_name = "FILE", requires = "serving_cert_file")]
    pub serving_key_file: Option<PathBuf>,
    /// The CA bundle (PEM) client certificates of /metrics must chain to (default: key
    /// client-ca-file of ConfigMap kube-system/extension-apiserver-authentication, as the CVO).
    #[arg(long, value_name = "FILE", requires = "metrics_addr")]
    pub metrics_client_ca_file: Option<PathBuf>,
    /// Serve --metrics-addr over plain HTTP, without TLS or authentication: anyone who reaches
    /// the address reads /metrics. For a loopback address; any other is warned about.
    #[arg(
        long,
        requires = "metrics_addr",
        conflicts_with_all = ["serving_cert_file", "serving_key_file", "metrics_client_ca_file"]
    )]
    pub metrics_plain_http: bool,
    /// How objects are written (as `apply`).
    #[arg(long, value_enum, default_value = "cvo", value_name = "STRATEGY")]
    pub apply_strategy: StrategyArg,
    /// Field manager for the writes.
    #[arg(long, default_value = "minicvo")]
    pub field_manager: String,
    /// Longest wait for one ClusterOperator.
    #[arg(long, default_value = "30m", value_parser = parse_duration, value_name = "DURATION")]
    pub wait_timeout: Duration,
    /// Graph nodes running at once (default: the CVO's for the mode).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallelism: Option<u32>,
    /// Install permissive stand-in CRDs for kinds nothing serves (as `apply`).
    #[arg(long)]
    pub stub_missing_crds: bool,
    /// Create namespaces the payload uses but creates nowhere (as `apply`).
    #[arg(long)]
    pub create_missing_namespaces: bool,
    /// Longest time to read the signatures of a release image that spec.desiredUpdate.image
    /// names (the CVO's: 2m, half its retrieval bound); a store that does not answer in time
    /// leaves the image unverified.
    #[arg(long, default_value = "2m", value_parser = parse_duration, value_name = "DURATION")]
    pub verify_timeout: Duration,
}

fn own_release(a: &OperatorArgs, index: &PayloadIndex) -> Result<String, UsageError> {
    if let Some(r) = &a.release {
        return Ok(r.clone());
    }
    let versions = index.versions();
    match versions.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(UsageError(format!(
            "no payload under {}\nhint: --payloads takes a payload root or a directory of them",
            a.payloads
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        many => Err(UsageError(format!(
            "--payloads holds {} releases ({}): say which the operator runs with --release",
            many.len(),
            many.join(", ")
        ))),
    }
}

/// Parses `--metrics-addr`: `PORT` is `127.0.0.1:PORT`.
fn metrics_addr(s: &str) -> Result<std::net::SocketAddr, UsageError> {
    let text = if s.parse::<u16>().is_ok() {
        format!("127.0.0.1:{s}")
    } else {
        s.to_string()
    };
    text.parse().map_err(|e| {
        UsageError(format!(
            "--metrics-addr {s:?}: {e} (expected HOST:PORT or PORT)"
        ))
    })
}

/// Binds `addr` and serves `/metrics`, `/healthz` and `/readyz` there until `cancel` fires.
async fn serve_metrics(
    a: &OperatorArgs,
    addr: std::net::SocketAddr,
    client: &kube::Client,
    hooks: &Hooks,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    use operator::http::{ClientCa, ClientCaSource, ServingCert, Transport};
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| UsageError(format!("--metrics-addr {addr}: {e}")))?;
    let local = listener.local_addr()?;
    let transport = if a.metrics_plain_http {
        if !local.ip().is_loopback() {
            tracing::warn!(
                "--metrics-plain-http on {local}, which is not a loopback address: anyone who \
                 can reach it reads /metrics, unencrypted and without authentication"
            );
        }
        tracing::info!("serving /metrics, /healthz and /readyz on http://{local}");
        Transport::PlainHttp
    } else {
        let cert = match (&a.serving_cert_file, &a.serving_key_file) {
            (Some(c), Some(k)) => ServingCert::from_files(c, k)
                .map_err(|e| UsageError(format!("--serving-cert-file: {e}")))?,
            _ => ServingCert::generate(&operator::http::tls::names_for(local))?,
        };
        let generated = if cert.is_generated() {
            " (self-signed, generated at start: clients cannot verify it; give \
             --serving-cert-file and --serving-key-file for one they can)"
        } else {
            ""
        };
        tracing::info!(
            "serving /metrics, /healthz and /readyz on https://{local}, certificate sha256 {}{generated}",
            cert.fingerprint()
        );
        let client_ca = ClientCa::new(
            a.metrics_client_ca_file
                .clone()
                .map_or(ClientCaSource::ConfigMap, ClientCaSource::File),
        );
        if a.metrics_client_ca_file.is_some() {
            // A file given must be usable now; the API server's CA may come later.
            client_ca
                .refresh(client)
                .await
                .map_err(|e| UsageError(format!("--metrics-client-ca-file: {e}")))?;
            tracing::info!("client CA for /metrics loaded from {}", client_ca.source());
        }
        Transport::tls(client.clone(), cert, client_ca, cancel)
    };
    let (m, h, c) = (hooks.metrics.clone(), hooks.health.clone(), cancel.clone());
    tokio::spawn(async move {
        if let Err(e) = operator::http::serve(listener, m, h, transport, c).await {
            tracing::error!("metrics server: {e}");
        }
    });
    Ok(())
}

/// Cancels `cancel` on SIGTERM or the first Ctrl-C.
fn cancel_on_signals(cancel: &CancellationToken) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = async {
                    match term.as_mut() {
                        Some(t) => { t.recv().await; }
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("stopping: the pass in flight starts no new work");
        cancel.cancel();
    });
}

/// Runs `operator`.
///
/// # Errors
/// Usage and connection errors; a lost lease.
pub fn operator(a: &OperatorArgs) -> anyhow::Result<ExitCode> {
    let index = PayloadIndex::new(a.payloads.clone()).with_images(a.image.options());
    for u in index.unreadable() {
        tracing::warn!("{} is not a payload: {}", u.path.display(), u.reason);
    }
    let release = own_release(a, &index)?;
    let filters = a.filters.filters()?;
    if a.filters.overrides.is_some() || a.filters.capabilities != "+" {
        return Err(UsageError(
            "--overrides and --capabilities are read from ClusterVersion spec by the operator"
                .into(),
        )
        .into());
    }
    let addr = a.metrics_addr.as_deref().map(metrics_addr).transpose()?;
    let identity = a
        .identity
        .clone()
        .unwrap_or_else(operator::leader::default_identity);
    let options = OperatorOptions {
        release,
        release_image: a.release_image.clone(),
        update_service: a.update_service.clone(),
        load: minicvo::LoadOptions {
            filters,
            release_image: a.release_image.clone(),
            substitute_placeholder: true,
            ..minicvo::LoadOptions::default()
        },
        explicit_features: super::features::explicit(&a.filters),
        apply: ApplyOptions {
            runner: RunnerOptions {
                field_manager: a.field_manager.clone(),
                wait_timeout: a.wait_timeout,
                strategy: a.apply_strategy.into(),
                ..RunnerOptions::default()
            },
            parallelism: a.parallelism.map(|p| p as usize),
            preflight: Some(minicvo::stub_crds::StandIns {
                crds: a.stub_missing_crds,
                namespaces: a.create_missing_namespaces,
            }),
            ..ApplyOptions::default()
        },
        schedule: Schedule::new(a.resync_interval, !a.no_resync_jitter, a.pass_timeout),
        leader: (!a.no_leader_elect).then(|| LeaderOptions {
            namespace: a.namespace.clone(),
            name: a.lease_name.clone(),
            identity: identity.clone(),
            lease_duration: a.lease_duration,
            renew_deadline: a.renew_deadline,
            retry_period: a.retry_period,
        }),
        namespace: a.namespace.clone(),
        verify_timeout: a.verify_timeout,
    };
    if a.renew_deadline >= a.lease_duration {
        return Err(
            UsageError("--renew-deadline must be shorter than --lease-duration".into()).into(),
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let conn = a.cluster.connect().await?;
        tracing::info!(
            "operator {identity} on {} (release {}, resync every {:.0?})",
            conn.server,
            options.release,
            options.schedule.interval
        );
        let cancel = CancellationToken::new();
        cancel_on_signals(&cancel);
        let hooks = Hooks::default();
        if let Some(addr) = addr {
            serve_metrics(a, addr, &conn.client, &hooks, &cancel).await?;
        }
        match operator::run(conn, index, options, hooks, cancel).await {
            Ok(()) => anyhow::Ok(ExitCode::SUCCESS),
            Err(e) => {
                eprintln!("error: {e}");
                Ok(ExitCode::from(super::EXIT_FAILURE))
            }
        }
    })
}
