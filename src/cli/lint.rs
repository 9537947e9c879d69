//! `minicvo lint PAYLOAD [--previous OLD]`: ordering hazards, payload mistakes and objects the
//! API server would refuse (offline schema validation), per profile.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;

use clap::{Args, ValueEnum};
use minicvo::analysis::lint::report::{self, ProfileReport, Report};
use minicvo::analysis::lint::{Context, Previous, lint as run_lint, schema, sort};
use minicvo::analysis::profiles_seen;
use minicvo::payload::{LoadOptions, ParseCache, load_unfiltered};
use minicvo::schema::BuiltIn;
use minicvo::{Mode, ObjectDetail, plan};

use super::EXIT_FAILURE;
use super::args::PayloadArgs;
use super::plan::print;

/// Output format of `lint`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LintFormat {
    /// Findings for people.
    Text,
    /// The `LintReport` JSON document.
    Json,
}

/// Arguments of `lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    #[command(flatten)]
    pub payload: PayloadArgs,
    /// The payload the cluster runs before the update: enables the checks against its
    /// workloads, CRDs and namespaces. A directory or a release image.
    #[arg(long, value_name = "OLD")]
    pub previous: Option<PathBuf>,
    /// Lint once per profile named by any `include.release.openshift.io/<profile>`
    /// annotation of the payload (overrides --profile).
    #[arg(long)]
    pub all_profiles: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: LintFormat,
    /// Kubernetes version whose built-in schemas the objects are checked against (one of
    /// the stored versions).
    #[arg(long, value_name = "MAJOR.MINOR", default_value = minicvo::schema::DEFAULT_KUBE_VERSION)]
    pub kube_version: String,
    /// More CRDs for checking custom resources: every CRD in the manifests of DIR (read as
    /// a payload, unfiltered).
    #[arg(long, value_name = "DIR")]
    pub crds: Option<PathBuf>,
    /// Skip the offline schema validation (the `schema` rule).
    #[arg(long)]
    pub no_schema: bool,
}

/// Runs `lint`; exits with 1 when any profile has an error-level finding. The version
/// placeholder is not substituted unless `--release-version` is given, so placeholders the
/// release tooling never replaced are reported.
///
/// # Errors
/// Load errors of either payload, usage errors of the filters.
pub fn lint(a: &LintArgs) -> anyhow::Result<ExitCode> {
    // The built-in schemas decode on their own thread while the payloads load.
    let mut builtin_loading = (!a.no_schema).then(|| {
        let version = a.kube_version.clone();
        std::thread::spawn(move || BuiltIn::load(&version).map(Arc::new))
    });
    // Every profile's load and the previous payload's parse each distinct file once (a
    // single load keeps no cache: it would only copy every file's text).
    let cache = (a.previous.is_some() || a.all_profiles).then(|| Arc::new(ParseCache::new()));
    let profiles: Vec<String> = if a.all_profiles {
        let (payload, options, _) =
            a.payload
                .load_cached(false, ObjectDetail::Whole, cache.as_ref())?;
        let seen = profiles_seen(&payload);
        if seen.is_empty() {
            vec![options.filters.profile]
        } else {
            seen.into_iter().collect()
        }
    } else {
        vec![a.payload.filters.profile.clone()]
    };
    let mut builtin: Option<Arc<BuiltIn>> = None;
    let extra_crds = match &a.crds {
        Some(dir) => {
            let options = LoadOptions::default();
            load_unfiltered(dir, &options)
                .with_context(|| format!("--crds {}", dir.display()))?
                .manifests
        }
        None => Vec::new(),
    };
    let mut reports = Vec::new();
    let mut payload_name = a.payload.payload.display().to_string();
    let mut previous_name = a.previous.as_ref().map(|p| p.display().to_string());
    let last = profiles.len().saturating_sub(1);
    for (i, profile) in profiles.into_iter().enumerate() {
        let mut args = a.payload.clone();
        args.filters.profile.clone_from(&profile);
        let (mut payload, options, image) =
            args.load_cached(false, ObjectDetail::Whole, cache.as_ref())?;
        if let Some(i) = image {
            payload_name = i.pinned;
        }
        if let Some(loading) = builtin_loading.take() {
            let loaded = loading
                .join()
                .map_err(|_| anyhow::anyhow!("loading the built-in schemas panicked"))??;
            builtin = Some(loaded);
        }
        let filters = &options.filters;
        // The payload's CRDs compile and its built-in kinds are checked while the previous
        // payload loads.
        let (early, old) = rayon::join(
            || {
                builtin
                    .as_ref()
                    .map(|b| schema::early(b.clone(), &payload.manifests))
            },
            || match &a.previous {
                Some(path) => {
                    let mut old_args = args.clone();
                    old_args.payload.clone_from(path);
                    old_args
                        .load_cached(false, ObjectDetail::Whole, cache.as_ref())
                        .map(|(old, _, image)| Some((old, image)))
                }
                None => Ok(None),
            },
        );
        let old = old?.map(|(old, image)| {
            if let Some(i) = image {
                previous_name = Some(i.pinned);
            }
            old
        });
        // The capabilities the update implicitly enables are on for the new payload.
        let new_filters = match &old {
            Some(old) => {
                minicvo::cvo::capabilities::with_implicit(
                    filters,
                    &payload.manifests,
                    &old.manifests,
                )
                .0
            }
            None => filters.clone(),
        };
        // The plans take the payloads over; only the exclusions are kept apart.
        let excluded = std::mem::take(&mut payload.excluded);
        let root = payload.root.clone();
        let (previous, plan) = rayon::join(
            || old.map(|old| plan::from_payload(old, filters, Mode::Updating, 0)),
            || plan::from_payload(payload, &new_filters, Mode::Updating, 0),
        );
        let cx = Context::new(
            &plan,
            &excluded,
            previous.as_ref().map(|plan| Previous { plan }),
        );
        // The rules and the rest of the schema validation are independent: run them side by
        // side.
        let (mut findings, schema_findings) = rayon::join(
            || {
                let mut findings = run_lint(&cx);
                findings.extend(minicvo::analysis::lint::duplicate_keys::check(&cx, &root));
                sort(&mut findings);
                findings
            },
            || {
                early
                    .map(|early| schema::check_early(early, &cx, &extra_crds))
                    .transpose()
            },
        );
        if let Some(more) = schema_findings? {
            findings.extend(more);
            sort(&mut findings);
        }
        reports.push(ProfileReport {
            profile,
            feature_set: plan.feature_set.clone(),
            findings,
        });
        if i == last {
            // The loaded payloads are not needed any more (earlier profiles' are freed, so
            // the peak stays that of one profile).
            drop(cx);
            super::keep_until_exit((plan, excluded, previous));
        }
    }
    let result = Report {
        payload: payload_name,
        previous: previous_name,
        profiles: reports,
    };
    let out = match a.output {
        LintFormat::Text => report::text(&result),
        LintFormat::Json => {
            let mut s = serde_json::to_string_pretty(&report::json(&result))?;
            s.push('\n');
            s
        }
    };
    print(&out)?;
    let has_errors = result.has_errors();
    super::keep_until_exit((result, out, builtin, extra_crds, cache));
    Ok(if has_errors {
        ExitCode::from(EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}
