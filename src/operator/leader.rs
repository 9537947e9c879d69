//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's lease lock does it and
//! the CVO uses it (`openshift-cluster-version/version` by default): a candidate takes a lease
//! that is free or expired, the leader renews it every retry period and gives up leadership
//! when it could not renew for the renew deadline, and a leader that stops gracefully releases
//! it so a standby takes over at once instead of after the lease duration.
//!
//! Written over the project's own request layer rather than a crate: the lease rules are the
//! ones the simulated pods already use ([`crate::simulate::pods::lease`]), and the only extra
//! is the renew loop here (kube-runtime has no leader election; the crates that add one pull
//! their own client stack).

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::PostParams;
use kube::core::Request;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::request::{self, RequestError};
use crate::cluster::watch;
use crate::simulate::pods::lease::{self, Step};

/// Where and how to elect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderOptions {
    /// Namespace of the Lease (created when missing).
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This candidate's identity (host name and a random suffix by default).
    pub identity: String,
    /// How long a lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// A leader that could not renew for this long stops leading.
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl LeaderOptions {
    /// The CVO's Lease (`openshift-cluster-version/version`) and timings (90 s lease, 45 s
    /// renew deadline, 30 s retry period) for `identity`.
    #[must_use]
    pub fn cvo(identity: String) -> Self {
        LeaderOptions {
            namespace: "openshift-cluster-version".into(),
            name: "version".into(),
            identity,
            lease_duration: Duration::from_secs(90),
            renew_deadline: Duration::from_secs(45),
            retry_period: Duration::from_secs(30),
        }
    }
}

/// A candidate for leadership.
#[derive(Clone)]
pub struct Elector {
    client: Client,
    options: LeaderOptions,
    request_timeout: Duration,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Elector {
    /// A candidate over `client`.
    #[must_use]
    pub fn new(client: Client, options: LeaderOptions) -> Self {
        let request_timeout = options
            .retry_period
            .clamp(Duration::from_secs(1), Duration::from_secs(10));
        Elector {
            client,
            options,
            request_timeout,
        }
    }

    /// The settings.
    #[must_use]
    pub fn options(&self) -> &LeaderOptions {
        &self.options
    }

    fn collection(&self) -> String {
        format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
            self.options.namespace
        )
    }

    /// Tries once: `Ok(Some(holder))` names the other leader, `Ok(None)` means we lead now.
    async fn try_once(&self) -> Result<Option<String>, RequestError> {
        let url = self.collection();
        let current =
            watch::get(&self.client, &url, &self.options.name, self.request_timeout).await?;
        let o = &self.options;
        let step = lease::decide(
            current.as_ref(),
            &o.namespace,
            &o.name,
            &o.identity,
            o.lease_duration,
            lease::now_us(),
        );
        match step {
            Step::Wait { holder, .. } => Ok(Some(holder)),
            Step::Create(body) => {
                match self.post(&url, &body).await {
                    Err(e) if e.missing_namespace().is_some() => {
                        self.create_namespace().await?;
                        self.post(&url, &body).await?;
                    }
                    r => {
                        r?;
                    }
                }
                Ok(None)
            }
            Step::Take(body) => {
                self.put(&url, &body).await?;
                Ok(None)
            }
        }
    }

    async fn post(&self, url: &str, body: &Value) -> Result<(), RequestError> {
        let bytes = serde_json::to_vec(body).map_err(|e| RequestError::Build(e.to_string()))?;
        let req = Request::new(url)
            .create(&PostParams::default(), bytes)
            .map_err(|e| RequestError::Build(e.to_string()))?;
        request::send(&self.client, req, self.request_timeout)
            .await
            .map(|_| ())
    }

    async fn put(&self, url: &str, body: &Value) -> Result<(), RequestError> {
        let bytes = serde_json::to_vec(body).map_err(|e| RequestError::Build(e.to_string()))?;
        let req = Request::new(url)
            .replace(&self.options.name, &PostParams::default(), bytes)
            .map_err(|e| RequestError::Build(e.to_string()))?;
        request::send(&self.client, req, self.request_timeout)
            .await
            .map(|_| ())
    }

    async fn create_namespace(&self) -> Result<(), RequestError> {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": self.options.namespace}});
        match self.post("/api/v1/namespaces", &ns).await {
            Err(e) if e.is(409) => Ok(()),
            r => r,
        }
    }

    /// Waits until this candidate leads (`true`) or `cancel` fires (`false`). Failed attempts
    /// (a lost race, an unreachable server) are retried every retry period; `on_wait` hears
    /// who leads while we wait.
    pub async fn acquire(&self, cancel: &CancellationToken, mut on_wait: impl FnMut(&str)) -> bool {
        let mut last_holder = String::new();
        loop {
            match self.try_once().await {
                Ok(None) => return true,
                Ok(Some(holder)) => {
                    if holder != last_holder {
                        on_wait(&holder);
                        last_holder = holder;
                    }
                }
                // 409: another candidate wrote first; read again next time.
                Err(e) => tracing::debug!("leader election: {e}"),
            }
            tokio::select! {
                () = cancel.cancelled() => return false,
                () = tokio::time::sleep(self.options.retry_period) => {}
            }
        }
    }

    /// Renews the lease every retry period until `stop` fires; when it could not renew for
    /// the renew deadline (or another holder took it), cancels `lost`.
    pub fn hold(
        self: Arc<Self>,
        stop: CancellationToken,
        lost: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut renewed = Instant::now();
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(self.options.retry_period) => {}
                }
                match self.try_once().await {
                    Ok(None) => renewed = Instant::now(),
                    Ok(Some(holder)) => {
                        tracing::error!("leader election: lease taken by {holder}");
                        lost.cancel();
                        return;
                    }
                    Err(e) => tracing::warn!("leader election: renewing: {e}"),
                }
                if renewed.elapsed() >= self.options.renew_deadline {
                    tracing::error!(
                        "leader election: could not renew for {:?}",
                        self.options.renew_deadline
                    );
                    lost.cancel();
                    return;
                }
            }
        })
    }

    /// Releases the lease if we hold it (a standby takes it at its next attempt).
    ///
    /// # Errors
    /// The request error.
    pub async fn release(&self) -> Result<(), RequestError> {
        let url = self.collection();
        let Some(current) =
            watch::get(&self.client, &url, &self.options.name, self.request_timeout).await?
        else {
            return Ok(());
        };
        if lease::holder(&current) != Some(self.options.identity.as_str()) {
            return Ok(());
        }
        let released = lease::released(&current, lease::now_us());
        self.put(&url, &released).await
    }

    /// The current holder of the lease, if any.
    ///
    /// # Errors
    /// The request error.
    pub async fn holder(&self) -> Result<Option<String>, RequestError> {
        let current = watch::get(
            &self.client,
            &self.collection(),
            &self.options.name,
            self.request_timeout,
        )
        .await?;
        Ok(current.as_ref().and_then(lease::holder).map(str::to_string))
    }
}

/// A default identity: the host name (the pod name in a cluster) and a random suffix.
#[must_use]
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "minicvo".into());
    let suffix: u32 = rand::random();
    format!("{host}_{suffix:08x}")
}
