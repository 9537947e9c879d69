//! Registry credentials, looked up as podman and oc do.
//!
//! Order: `--registry-config FILE` (only that file); else `$REGISTRY_AUTH_FILE`; else
//! `$DOCKER_CONFIG/config.json` or `~/.docker/config.json`, then
//! `$XDG_RUNTIME_DIR/containers/auth.json`, then `~/.config/containers/auth.json`. The first
//! file with an entry for the registry wins. An entry is the most specific key matching
//! `REGISTRY/REPO` (podman's per-repository keys), then `REGISTRY`, then
//! `https://REGISTRY` forms; values are `auth` (base64 `user:password`) or
//! `username`/`password`. Credential helpers (`credsStore`) are not consulted.

use std::path::{Path, PathBuf};

use base64::Engine as _;

/// The auth files to look at, in order.
#[derive(Debug, Clone, Default)]
pub struct AuthFiles {
    /// Candidate files, first match wins.
    pub files: Vec<PathBuf>,
}

/// What the lookup found for one registry.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// User and password, when an entry was found.
    pub basic: Option<(String, String)>,
    /// The file the entry came from.
    pub from: Option<PathBuf>,
    /// Each file looked at and what it gave, for error messages.
    pub looked_at: Vec<String>,
}

impl Credentials {
    /// A phrase for a 401 message: which files were looked at, or which credentials failed.
    #[must_use]
    pub fn describe(&self, registry: &str) -> String {
        match &self.from {
            Some(file) => format!(
                "the credentials for {registry} from {} were refused",
                file.display()
            ),
            None if self.looked_at.is_empty() => {
                format!("no credentials for {registry} (no auth file to look at)")
            }
            None => format!(
                "no credentials for {registry} in {}",
                self.looked_at.join(", ")
            ),
        }
    }
}

impl AuthFiles {
    /// The lookup order for `--registry-config` (when given) and the environment.
    #[must_use]
    pub fn lookup(registry_config: Option<&Path>) -> Self {
        if let Some(file) = registry_config {
            return Self {
                files: vec![file.to_path_buf()],
            };
        }
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let mut files = Vec::new();
        if let Some(f) = env("REGISTRY_AUTH_FILE") {
            files.push(f);
        }
        let home = env("HOME");
        if let Some(d) = env("DOCKER_CONFIG") {
            files.push(d.join("config.json"));
        } else if let Some(h) = &home {
            files.push(h.join(".docker/config.json"));
        }
        if let Some(r) = env("XDG_RUNTIME_DIR") {
            files.push(r.join("containers/auth.json"));
        }
        if let Some(h) = &home {
            files.push(h.join(".config/containers/auth.json"));
        }
        Self { files }
    }

    /// Credentials for `registry` (`host` or `host:port`) and `repository`.
    #[must_use]
    pub fn find(&self, registry: &str, repository: &str) -> Credentials {
        let mut looked_at = Vec::new();
        for file in &self.files {
            let text = match std::fs::read_to_string(file) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    looked_at.push(format!("{} (not found)", file.display()));
                    continue;
                }
                Err(e) => {
                    looked_at.push(format!("{} (unreadable: {e})", file.display()));
                    continue;
                }
            };
            match entry_in(&text, registry, repository) {
                Ok(Some(basic)) => {
                    looked_at.push(format!("{} (used)", file.display()));
                    return Credentials {
                        basic: Some(basic),
                        from: Some(file.clone()),
                        looked_at,
                    };
                }
                Ok(None) => looked_at.push(format!("{} (no entry)", file.display())),
                Err(reason) => looked_at.push(format!("{} ({reason})", file.display())),
            }
        }
        Credentials {
            basic: None,
            from: None,
            looked_at,
        }
    }
}

/// Normalises an `auths` key to `host[/path]`.
fn normalise_key(key: &str) -> String {
    let k = key
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let k = k
        .strip_suffix("/v1/")
        .or_else(|| k.strip_suffix("/v2/"))
        .unwrap_or(k);
    let k = k.trim_end_matches('/');
    match k {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
        k => k.to_string(),
    }
}

fn entry_in(
    text: &str,
    registry: &str,
    repository: &str,
) -> Result<Option<(String, String)>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Some(auths) = doc.get("auths").and_then(|a| a.as_object()) else {
        return Ok(None);
    };
    let registry = normalise_key(registry);
    let full = format!("{registry}/{repository}");
    // The longest key that is the registry or a path prefix of registry/repository.
    let best = auths
        .iter()
        .map(|(k, v)| (normalise_key(k), v))
        .filter(|(k, _)| *k == registry || full == *k || full.starts_with(&format!("{k}/")))
        .max_by_key(|(k, _)| k.len());
    let Some((key, value)) = best else {
        return Ok(None);
    };
    if let Some(auth) = value
        .get("auth")
        .and_then(|a| a.as_str())
        .filter(|a| !a.is_empty())
    {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|e| format!("entry {key}: auth is not base64: {e}"))?;
        let pair = String::from_utf8(raw).map_err(|_| format!("entry {key}: auth is not UTF-8"))?;
        let (user, pass) = pair
            .split_once(':')
            .ok_or_else(|| format!("entry {key}: auth is not user:password"))?;
        return Ok(Some((user.to_string(), pass.to_string())));
    }
    match (
        value.get("username").and_then(|u| u.as_str()),
        value.get("password").and_then(|p| p.as_str()),
    ) {
        (Some(u), Some(p)) => Ok(Some((u.to_string(), p.to_string()))),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_specific_key_wins_and_forms_are_normalised() {
        let text = r#"{"auths":{
            "https://quay.io":{"auth":"dTE6cDE="},
            "quay.io/openshift":{"username":"u2","password":"p2"},
            "https://index.docker.io/v1/":{"auth":"dTM6cDM="}}}"#;
        assert_eq!(
            entry_in(text, "quay.io", "openshift/release").unwrap(),
            Some(("u2".into(), "p2".into()))
        );
        assert_eq!(
            entry_in(text, "quay.io", "other/x").unwrap(),
            Some(("u1".into(), "p1".into()))
        );
        assert_eq!(
            entry_in(text, "index.docker.io", "library/x").unwrap(),
            Some(("u3".into(), "p3".into()))
        );
        assert_eq!(entry_in(text, "example.com", "x").unwrap(), None);
        assert!(entry_in("{", "quay.io", "x").is_err());
    }
}
