//! Pulling from a registry with `oci-client`: manifest HEAD (the only request on a cache
//! hit), manifest and index GETs by digest, and layer blobs streamed into the extractor.

use futures::TryStreamExt as _;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use tokio_util::io::{StreamReader, SyncIoBridge};

use super::manifest::{self, Manifest};
use super::{
    AuthFiles, Credentials, FetchOptions, Fetched, ImageError, cache, check_manifest_size,
    extractor, finish, from_cache, verify_manifest,
};

const ACCEPT: &[&str] = &[
    manifest::OCI_MANIFEST,
    manifest::DOCKER_MANIFEST,
    manifest::OCI_INDEX,
    manifest::DOCKER_LIST,
];

struct Remote<'a> {
    image: &'a str,
    registry: String,
    credentials: Credentials,
    auth: RegistryAuth,
    client: Client,
}

impl Remote<'_> {
    fn error(&self, e: OciDistributionError) -> ImageError {
        let unauthorized = match &e {
            OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_) => true,
            OciDistributionError::ServerError { code, .. } => *code == 401,
            OciDistributionError::RegistryError { envelope, .. } => format!("{envelope:?}")
                .to_ascii_lowercase()
                .contains("unauthorized"),
            _ => false,
        };
        if unauthorized {
            ImageError::Unauthorized {
                image: self.image.to_string(),
                registry: self.registry.clone(),
                credentials: self.credentials.describe(&self.registry),
            }
        } else {
            ImageError::Registry {
                image: self.image.to_string(),
                registry: self.registry.clone(),
                message: e.to_string(),
            }
        }
    }

    async fn manifest(
        &self,
        reference: &Reference,
        digest: &str,
        limits: &super::Limits,
    ) -> Result<Manifest, ImageError> {
        let (bytes, _) = self
            .client
            .pull_manifest_raw(reference, &self.auth, ACCEPT)
            .await
            .map_err(|e| self.error(e))?;
        check_manifest_size(
            self.image,
            &format!("manifest {digest}"),
            bytes.len() as u64,
            limits,
        )?;
        verify_manifest(self.image, digest, &bytes)?;
        manifest::parse(self.image, digest, &bytes, None)
    }
}

/// The manifest digest by one anonymous `HEAD`, as a cache check needs: `None` when the
/// registry wants auth (then the client's authenticated path runs) or sends no digest.
async fn anonymous_head(
    reference: &Reference,
    registry: &str,
    insecure: &[String],
) -> Option<String> {
    let plain = super::is_loopback(registry)
        || insecure
            .iter()
            .any(|h| h == registry || registry.rsplit_once(':').is_some_and(|(host, _)| host == h));
    let url = format!(
        "{}://{registry}/v2/{}/manifests/{}",
        if plain { "http" } else { "https" },
        reference.repository(),
        reference.tag().unwrap_or("latest")
    );
    let response = reqwest::Client::new()
        .head(&url)
        .header(reqwest::header::ACCEPT, ACCEPT.join(", "))
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let digest = response
        .headers()
        .get("docker-content-digest")?
        .to_str()
        .ok()?;
    Some(digest.to_string())
}

/// Pulls `image` from its registry (or the cache).
pub async fn fetch(image: &str, options: &FetchOptions) -> Result<Fetched, ImageError> {
    let reference = Reference::try_from(image).map_err(|e| ImageError::BadReference {
        arg: image.to_string(),
        reason: e.to_string(),
    })?;
    let registry = reference.resolve_registry().to_string();
    let credentials = AuthFiles::lookup(options.registry_config.as_deref())
        .find(reference.registry(), reference.repository());
    let auth = match &credentials.basic {
        Some((u, p)) => RegistryAuth::Basic(u.clone(), p.clone()),
        None => RegistryAuth::Anonymous,
    };
    let mut plain: Vec<String> = options.insecure_registries.clone();
    if super::is_loopback(&registry)
        || options
            .insecure_registries
            .iter()
            .any(|h| h == &registry || registry.rsplit_once(':').is_some_and(|(host, _)| host == h))
    {
        plain.push(registry.clone());
    }
    let config = ClientConfig {
        protocol: ClientProtocol::HttpsExcept(plain),
        platform_resolver: None,
        ..ClientConfig::default()
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let remote = Remote {
        image,
        registry: registry.clone(),
        credentials,
        auth,
        client: Client::new(config),
    };
    let digest = match reference.digest() {
        Some(d) => d.to_string(),
        None => match anonymous_head(&reference, &registry, &options.insecure_registries).await {
            Some(d) => d,
            None => remote
                .client
                .fetch_manifest_digest(&reference, &remote.auth)
                .await
                .map_err(|e| remote.error(e))?,
        },
    };
    manifest::digest_hex(image, &digest)?;
    let pinned = format!(
        "{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    );
    if let Some((dir, meta)) = cache::lookup(&options.cache, &digest, options.platform.as_ref()) {
        return Ok(from_cache(image, pinned, dir, meta));
    }
    let by_digest = |d: &str| {
        Reference::with_digest(
            reference.registry().to_string(),
            reference.repository().to_string(),
            d.to_string(),
        )
    };
    let top = by_digest(&digest);
    let (layers, manifest_digest, platform) =
        match remote.manifest(&top, &digest, &options.limits).await? {
            Manifest::Image(layers) => (layers, digest.clone(), None),
            Manifest::Index(entries) => {
                let (entry, platform) =
                    manifest::select(image, &entries, options.platform.as_ref())?;
                check_manifest_size(
                    image,
                    &format!("manifest {}", entry.digest),
                    entry.size,
                    &options.limits,
                )?;
                match remote
                    .manifest(&by_digest(&entry.digest), &entry.digest, &options.limits)
                    .await?
                {
                    Manifest::Image(layers) => {
                        (layers, entry.digest.clone(), Some(platform.to_string()))
                    }
                    Manifest::Index(_) => {
                        return Err(ImageError::NotAnImage {
                            image: image.to_string(),
                            what: format!("manifest {}", entry.digest),
                            reason: "an index inside an index".into(),
                        });
                    }
                }
            }
        };
    let staging = cache::stage(&options.cache)?;
    let mut ex = extractor(&staging, image, options.limits);
    for (i, layer) in layers.iter().enumerate() {
        if layer.size > options.limits.layer_bytes {
            return Err(ImageError::TooLarge {
                image: image.to_string(),
                what: format!("layer {i} ({})", layer.digest),
                size: layer.size,
                limit: options.limits.layer_bytes,
            });
        }
        let stream = remote
            .client
            .pull_blob_stream(&top, layer.digest.as_str())
            .await
            .map_err(|e| remote.error(e))?;
        let reader = StreamReader::new(stream.stream.map_err(std::io::Error::other));
        let layer = layer.clone();
        ex = tokio::task::spawn_blocking(move || {
            let bridge = SyncIoBridge::new(reader);
            ex.layer(i, &layer, bridge).map(|()| ex)
        })
        .await
        .map_err(|e| ImageError::Layer {
            image: image.to_string(),
            layer: i,
            digest: String::new(),
            message: e.to_string(),
        })??;
    }
    let meta = cache::EntryMeta {
        digest,
        manifest_digest,
        platform,
        bytes: 0,
    };
    finish(image, pinned, staging, meta, options)
}
