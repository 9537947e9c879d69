//! Which kind of payload an argument names: a directory, a registry image, an OCI layout or an
//! archive.

use std::fmt;
use std::path::{Path, PathBuf};

use super::ImageError;

/// Where a payload comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A payload directory (any existing path, and anything that is not an image reference).
    Directory(PathBuf),
    /// An image in a registry: `REGISTRY/REPO:TAG` or `REGISTRY/REPO@sha256:…`.
    Registry(String),
    /// An OCI image layout directory, with an optional tag (`org.opencontainers.image.ref.name`).
    OciLayout {
        /// The layout directory.
        dir: PathBuf,
        /// The tag; without it the layout must hold one image.
        tag: Option<String>,
    },
    /// A tar of an OCI image layout (`oci-archive:FILE`).
    OciArchive(PathBuf),
    /// A `docker save` tar (`docker-archive:FILE`).
    DockerArchive(PathBuf),
}

impl Source {
    /// Resolves a command-line argument:
    ///
    /// 1. `oci:DIR[:TAG]`, `oci-archive:FILE`, `docker-archive:FILE` and `docker://REF` by
    ///    their prefix;
    /// 2. otherwise a path that exists is a directory;
    /// 3. otherwise a name whose first component has a `.` or a `:` or is `localhost` (a
    ///    registry host), or that has an `@sha256:` digest, is a registry image;
    /// 4. anything else is a directory (which then fails to load, naming the path).
    ///
    /// # Errors
    /// [`ImageError::BadReference`] for a registry-looking argument that does not parse.
    pub fn resolve(arg: &str) -> Result<Self, ImageError> {
        if let Some(rest) = arg.strip_prefix("oci:") {
            let (dir, tag) = match rest.rsplit_once(':') {
                Some((dir, tag)) if !tag.contains('/') && !dir.is_empty() => {
                    (dir, Some(tag.to_string()))
                }
                _ => (rest, None),
            };
            return Ok(Self::OciLayout {
                dir: PathBuf::from(dir),
                tag,
            });
        }
        if let Some(rest) = arg.strip_prefix("oci-archive:") {
            return Ok(Self::OciArchive(PathBuf::from(rest)));
        }
        if let Some(rest) = arg.strip_prefix("docker-archive:") {
            return Ok(Self::DockerArchive(PathBuf::from(rest)));
        }
        if let Some(rest) = arg.strip_prefix("docker://") {
            return Self::registry(arg, rest);
        }
        if Path::new(arg).exists() {
            return Ok(Self::Directory(PathBuf::from(arg)));
        }
        let first = arg.split('/').next().unwrap_or_default();
        let looks_like_registry = arg.contains('/')
            && (first.contains('.') || first.contains(':') || first == "localhost");
        if looks_like_registry || arg.contains("@sha256:") {
            return Self::registry(arg, arg);
        }
        Ok(Self::Directory(PathBuf::from(arg)))
    }

    fn registry(arg: &str, reference: &str) -> Result<Self, ImageError> {
        oci_client::Reference::try_from(reference).map_err(|e| ImageError::BadReference {
            arg: arg.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Self::Registry(reference.to_string()))
    }

    /// Whether this is an image (anything but a directory).
    #[must_use]
    pub fn is_image(&self) -> bool {
        !matches!(self, Self::Directory(_))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Directory(p) => write!(f, "{}", p.display()),
            Self::Registry(r) => write!(f, "{r}"),
            Self::OciLayout { dir, tag: None } => write!(f, "oci:{}", dir.display()),
            Self::OciLayout { dir, tag: Some(t) } => write!(f, "oci:{}:{t}", dir.display()),
            Self::OciArchive(p) => write!(f, "oci-archive:{}", p.display()),
            Self::DockerArchive(p) => write!(f, "docker-archive:{}", p.display()),
        }
    }
}

/// An image platform: `os/arch[/variant]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// Operating system (`linux`).
    pub os: String,
    /// Architecture in OCI terms (`amd64`, `arm64`, `ppc64le`, `s390x`).
    pub architecture: String,
    /// Variant (`v8`), when given.
    pub variant: Option<String>,
}

impl Platform {
    /// `linux/amd64`, the fallback for release images.
    #[must_use]
    pub fn linux_amd64() -> Self {
        Self {
            os: "linux".into(),
            architecture: "amd64".into(),
            variant: None,
        }
    }

    /// The machine's platform: linux and the OCI name of this CPU architecture.
    #[must_use]
    pub fn host() -> Self {
        let architecture = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "powerpc64" => "ppc64le",
            "x86" => "386",
            other => other,
        };
        Self {
            os: "linux".into(),
            architecture: architecture.into(),
            variant: None,
        }
    }
}

impl std::str::FromStr for Platform {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split('/');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(os), Some(arch), variant, None) if !os.is_empty() && !arch.is_empty() => {
                Ok(Self {
                    os: os.into(),
                    architecture: arch.into(),
                    variant: variant.filter(|v| !v.is_empty()).map(Into::into),
                })
            }
            _ => Err(format!("platform {s:?} is not OS/ARCH[/VARIANT]")),
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_resolve_by_prefix_then_path_then_registry_shape() {
        assert_eq!(
            Source::resolve("oci:/tmp/l:4.17").unwrap(),
            Source::OciLayout {
                dir: "/tmp/l".into(),
                tag: Some("4.17".into())
            }
        );
        assert_eq!(
            Source::resolve("oci:rel").unwrap(),
            Source::OciLayout {
                dir: "rel".into(),
                tag: None
            }
        );
        assert_eq!(
            Source::resolve("quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64").unwrap(),
            Source::Registry("quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64".into())
        );
        assert_eq!(
            Source::resolve("127.0.0.1:5000/r@sha256:0123456789012345678901234567890123456789012345678901234567890123").unwrap(),
            Source::Registry("127.0.0.1:5000/r@sha256:0123456789012345678901234567890123456789012345678901234567890123".into())
        );
        assert_eq!(
            Source::resolve("no/such/dir").unwrap(),
            Source::Directory("no/such/dir".into())
        );
        assert_eq!(
            Source::resolve("src").unwrap(),
            Source::Directory("src".into())
        );
        assert!(Source::resolve("quay.io/UPPER/x:1").is_err());
    }

    #[test]
    fn platforms_parse_with_optional_variant() {
        let p: Platform = "linux/arm64/v8".parse().unwrap();
        assert_eq!(p.to_string(), "linux/arm64/v8");
        assert!("linux".parse::<Platform>().is_err());
    }
}
