//! Arguments shared by every command that reads a payload, and by every command that talks to
//! a cluster.

use std::path::PathBuf;

use clap::Args;
use minicvo::filter::{self, Filters, KNOWN_FEATURE_SETS};
use minicvo::{LoadOptions, Mode, ObjectDetail};

use super::UsageError;

/// Inclusion filters, as the CVO takes them from the cluster.
#[derive(Debug, Clone, Args)]
pub struct FilterArgs {
    /// Cluster profile (`include.release.openshift.io/<profile>` must be "true").
    #[arg(long, default_value = filter::DEFAULT_PROFILE)]
    pub profile: String,
    /// Feature set (empty means Default).
    #[arg(long, default_value = "")]
    pub feature_set: String,
    /// Enabled feature gates, comma-separated. Without this flag the gate filter is off and
    /// gated manifests are kept; with it (even empty) only the listed gates are enabled.
    #[arg(long, value_delimiter = ',', num_args = 0..)]
    pub feature_gates: Option<Vec<String>>,
    /// Enabled capabilities, comma-separated; `+` (the default) means all.
    #[arg(long, default_value = "+")]
    pub capabilities: String,
    /// Exclusion identifier: manifests with `exclude.release.openshift.io/<ID>: "true"` are left out.
    #[arg(long, value_name = "ID")]
    pub exclude: Option<String>,
    /// ClusterVersion overrides file (a ClusterVersion, `overrides:` or a list).
    #[arg(long, value_name = "FILE")]
    pub overrides: Option<PathBuf>,
}

impl FilterArgs {
    /// Resolves the flags into [`Filters`].
    ///
    /// # Errors
    /// [`UsageError`] for an unknown feature set or an unreadable overrides file.
    pub fn filters(&self) -> Result<Filters, UsageError> {
        if !self.feature_set.is_empty() && !KNOWN_FEATURE_SETS.contains(&self.feature_set.as_str())
        {
            return Err(UsageError(format!(
                "unknown feature set {:?}\nhint: one of {}",
                self.feature_set,
                KNOWN_FEATURE_SETS.join(", ")
            )));
        }
        let overrides = match &self.overrides {
            None => Vec::new(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| UsageError(format!("{}: cannot read: {e}", path.display())))?;
                filter::parse_overrides(&text)
                    .map_err(|e| UsageError(format!("{}: {e}", path.display())))?
            }
        };
        Ok(Filters {
            exclude: self.exclude.clone().filter(|s| !s.is_empty()),
            feature_set: self.feature_set.clone(),
            feature_gates: self.feature_gates.as_ref().map(|gates| {
                gates
                    .iter()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            }),
            profile: self.profile.clone(),
            capabilities: filter::parse_capabilities(&self.capabilities),
            overrides,
        })
    }
}

/// How release images are pulled (for every payload argument that names an image).
#[derive(Debug, Clone, Default, Args)]
pub struct ImageArgs {
    /// Registry auth file (a pull secret or docker config.json); only this file is read.
    /// Default: $REGISTRY_AUTH_FILE, else ~/.docker/config.json, then the containers
    /// auth.json files.
    #[arg(long, value_name = "FILE")]
    pub registry_config: Option<PathBuf>,
    /// Platform picked from a multi-arch release image (default: this machine's, else
    /// linux/amd64).
    #[arg(long, value_name = "OS/ARCH[/VARIANT]", value_parser = parse_platform)]
    pub platform: Option<minicvo::image::Platform>,
    /// Reach this registry (HOST or HOST:PORT) over plain HTTP. Loopback registries always
    /// are.
    #[arg(long, value_name = "HOST")]
    pub insecure_registry: Vec<String>,
    /// Do not keep the extracted payload in the image cache (it is extracted, used and
    /// deleted).
    #[arg(long)]
    pub no_cache: bool,
}

fn parse_platform(s: &str) -> Result<minicvo::image::Platform, String> {
    s.parse()
}

impl ImageArgs {
    /// The library's fetch options.
    #[must_use]
    pub fn options(&self) -> minicvo::image::FetchOptions {
        let mut o = minicvo::image::FetchOptions {
            registry_config: self.registry_config.clone(),
            platform: self.platform.clone(),
            insecure_registries: self.insecure_registry.clone(),
            ..minicvo::image::FetchOptions::default()
        };
        o.cache.enabled = !self.no_cache;
        o
    }

    /// Resolves a payload argument: a directory as is, an image pulled (or taken from the
    /// cache) and extracted. Logs the image and its digest on stderr.
    ///
    /// # Errors
    /// [`minicvo::image::ImageError`].
    pub fn fetch(&self, arg: &std::path::Path) -> anyhow::Result<minicvo::image::Fetched> {
        let text = arg.to_string_lossy();
        let source = minicvo::image::Source::resolve(&text)?;
        let fetched = minicvo::image::fetch_blocking(&source, &self.options())?;
        if source.is_image() {
            let i = &fetched.info;
            tracing::info!(
                "image {} is {}{}{}",
                i.image,
                i.pinned,
                i.platform
                    .as_ref()
                    .map(|p| format!(" ({p} {})", i.manifest_digest))
                    .unwrap_or_default(),
                if i.cached { ", from the cache" } else { "" }
            );
        }
        Ok(fetched)
    }
}

/// The image a payload came from, for outputs: `{"image", "pinned", "digest", ...}`.
#[must_use]
pub fn image_json(info: &minicvo::image::ImageInfo) -> serde_json::Value {
    serde_json::json!({
        "image": info.image,
        "pullSpec": info.pinned,
        "digest": info.digest,
        "manifestDigest": info.manifest_digest,
        "platform": info.platform,
    })
}

/// A payload (directory or release image) plus filters and version options.
#[derive(Debug, Clone, Args)]
pub struct PayloadArgs {
    /// Payload directory (with release-manifests/ and optionally manifests/, or a bare
    /// directory of manifests), or a release image: REGISTRY/REPO:TAG, REGISTRY/REPO@sha256:…,
    /// oci:DIR[:TAG], oci-archive:FILE, docker-archive:FILE. An existing path is a directory.
    pub payload: PathBuf,
    #[command(flatten)]
    pub filters: FilterArgs,
    #[command(flatten)]
    pub image: ImageArgs,
    /// Release image pull spec rendered into `{{.ReleaseImage}}` in manifests/.
    #[arg(long, default_value = "")]
    pub release_image: String,
    /// Replace the `0.0.1-snapshot` placeholder in every manifest with this version, as the
    /// release tooling does.
    #[arg(long, value_name = "VERSION")]
    pub release_version: Option<String>,
}

impl PayloadArgs {
    /// Resolves into [`LoadOptions`]. `substitute` replaces the version placeholder with the
    /// payload's version when `--release-version` is not given.
    ///
    /// # Errors
    /// [`UsageError`] from the filters.
    pub fn load_options(&self, substitute: bool) -> Result<LoadOptions, UsageError> {
        Ok(LoadOptions {
            filters: self.filters.filters()?,
            release_image: self.release_image.clone(),
            release_version: self.release_version.clone(),
            substitute_placeholder: substitute,
            detail: ObjectDetail::Whole,
            parse_cache: None,
        })
    }

    /// Loads the payload, logging warnings and (at -v) why each manifest was excluded.
    /// `substitute` as in [`PayloadArgs::load_options`].
    ///
    /// # Errors
    /// The load error, or a usage error from the filters.
    pub fn load(&self, substitute: bool) -> anyhow::Result<(minicvo::Payload, LoadOptions)> {
        let (payload, options, _) = self.load_image(substitute, ObjectDetail::Whole)?;
        Ok((payload, options))
    }

    /// [`PayloadArgs::load`] with `filters` instead of the flags' (the features a cluster
    /// gives).
    ///
    /// # Errors
    /// The load error.
    pub fn load_filtered(
        &self,
        substitute: bool,
        filters: minicvo::Filters,
    ) -> anyhow::Result<(minicvo::Payload, LoadOptions)> {
        let (payload, options, _) =
            self.load_with(substitute, ObjectDetail::Whole, None, Some(filters))?;
        Ok((payload, options))
    }

    /// [`PayloadArgs::load`], keeping of each object what `detail` says, and also returning
    /// the image the payload came from (when it is an image). For an image,
    /// `{{.ReleaseImage}}` defaults to its pull spec by digest.
    ///
    /// # Errors
    /// Image, load and usage errors.
    pub fn load_image(
        &self,
        substitute: bool,
        detail: ObjectDetail,
    ) -> anyhow::Result<(
        minicvo::Payload,
        LoadOptions,
        Option<minicvo::image::ImageInfo>,
    )> {
        self.load_with(substitute, detail, None, None)
    }

    /// [`PayloadArgs::load_image`] through a parse cache shared with other loads of the
    /// command (a file another load parsed with the same text is not parsed again).
    ///
    /// # Errors
    /// Image, load and usage errors.
    pub fn load_cached(
        &self,
        substitute: bool,
        detail: ObjectDetail,
        cache: Option<&std::sync::Arc<minicvo::payload::ParseCache>>,
    ) -> anyhow::Result<(
        minicvo::Payload,
        LoadOptions,
        Option<minicvo::image::ImageInfo>,
    )> {
        self.load_with(substitute, detail, cache, None)
    }

    /// [`PayloadArgs::load_cached`], with `filters` instead of the flags' when given.
    fn load_with(
        &self,
        substitute: bool,
        detail: ObjectDetail,
        cache: Option<&std::sync::Arc<minicvo::payload::ParseCache>>,
        filters: Option<minicvo::Filters>,
    ) -> anyhow::Result<(
        minicvo::Payload,
        LoadOptions,
        Option<minicvo::image::ImageInfo>,
    )> {
        let mut options = self.load_options(substitute)?;
        if let Some(f) = filters {
            options.filters = f;
        }
        options.detail = detail;
        options.parse_cache = cache.cloned();
        let fetched = self.image.fetch(&self.payload)?;
        let info = (fetched.dir != self.payload).then(|| fetched.info.clone());
        if let Some(i) = &info
            && options.release_image.is_empty()
        {
            options.release_image.clone_from(&i.pinned);
        }
        let mut payload = minicvo::load(&fetched.dir, &options)?;
        if let Some(i) = &info {
            // Outputs name the image, not the cache directory it was extracted to.
            payload.root = PathBuf::from(&i.pinned);
        }
        for w in &payload.warnings {
            tracing::warn!("{w}");
        }
        for e in &payload.excluded {
            tracing::info!("excluded {}: {}", e.manifest.label(), e.reason);
        }
        Ok((payload, options, info))
    }
}

/// Parses a mode name for clap.
pub fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

/// How to reach the cluster, as kubectl's flags of the same names.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// Kubeconfig file (only this file; default: $KUBECONFIG merged, else ~/.kube/config,
    /// else the in-cluster service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Do not verify the API server's certificate (insecure: the server is not authenticated;
    /// minicvo warns). Prefer adding the cluster's CA to the kubeconfig.
    #[arg(long)]
    pub insecure_skip_tls_verify: bool,
}

impl ClusterArgs {
    /// Connects with these flags; a kubeconfig problem is a usage error.
    ///
    /// # Errors
    /// [`UsageError`] naming what is wrong with the kubeconfig.
    pub async fn connect(&self) -> Result<minicvo::apply::Connection, UsageError> {
        minicvo::apply::connect_with(
            self.kubeconfig.as_deref(),
            self.context.as_deref(),
            self.insecure_skip_tls_verify,
        )
        .await
        .map_err(|e| UsageError(e.to_string()))
    }
}

/// `--apply-strategy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyArg {
    /// The CVO's way: GET, its per-kind merge, UPDATE only when the merge changed something.
    Cvo,
    /// One forced server-side apply per object (field manager `--field-manager`).
    ServerSide,
}

impl From<StrategyArg> for minicvo::apply::ApplyStrategy {
    fn from(s: StrategyArg) -> Self {
        match s {
            StrategyArg::Cvo => minicvo::apply::ApplyStrategy::Cvo,
            StrategyArg::ServerSide => minicvo::apply::ApplyStrategy::ServerSide,
        }
    }
}
