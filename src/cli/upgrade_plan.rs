//! `minicvo upgrade-plan OLD NEW`: what an update from OLD to NEW does to every object.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use minicvo::analysis::upgrade_plan::{self, dot, json, text};

use super::args::{FilterArgs, ImageArgs, PayloadArgs, image_json};
use super::plan::{pinned_line, print};

/// Output format of `upgrade-plan`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum UpgradePlanFormat {
    /// NEW's plan with every object's change, then what NEW leaves behind.
    Text,
    /// The `UpgradePlan` JSON document.
    Json,
    /// Graphviz DOT of NEW's graph, nodes coloured by change.
    Dot,
}

/// Arguments of `upgrade-plan`.
#[derive(Debug, Args)]
pub struct UpgradePlanArgs {
    /// The payload the cluster runs now (a directory or a release image).
    pub old: PathBuf,
    /// The payload to update to (a directory or a release image).
    pub new: PathBuf,
    /// Filters, applied to both payloads.
    #[command(flatten)]
    pub filters: FilterArgs,
    #[command(flatten)]
    pub image: ImageArgs,
    /// Show a unified diff of the YAML of every updated object (text and JSON).
    #[arg(long)]
    pub diff: bool,
    /// Leave unchanged objects out of the text listing.
    #[arg(long)]
    pub changed_only: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: UpgradePlanFormat,
}

/// Runs `upgrade-plan`. Each payload's `0.0.1-snapshot` placeholder is replaced by its own
/// release version (when it has `release-metadata`), as `apply` does.
///
/// # Errors
/// Load errors of either payload, usage errors of the filters.
pub fn upgrade_plan(a: &UpgradePlanArgs) -> anyhow::Result<ExitCode> {
    // Files the two payloads share are parsed once.
    let cache = std::sync::Arc::new(minicvo::payload::ParseCache::new());
    let load = |path: &PathBuf| {
        PayloadArgs {
            payload: path.clone(),
            filters: a.filters.clone(),
            image: a.image.clone(),
            release_image: String::new(),
            release_version: None,
        }
        .load_cached(true, minicvo::ObjectDetail::Whole, Some(&cache))
    };
    let (old, options, old_image) = load(&a.old)?;
    let (new, _, new_image) = load(&a.new)?;
    let (filters, implicit) =
        minicvo::cvo::capabilities::with_implicit(&options.filters, &new.manifests, &old.manifests);
    for line in minicvo::cvo::capabilities::describe(&implicit) {
        eprintln!("note: {line}");
    }
    let up = upgrade_plan::build(&old, &new, &filters);
    let out = match a.output {
        UpgradePlanFormat::Text => {
            let mut out = String::new();
            for (which, image) in [("Old", &old_image), ("New", &new_image)] {
                if let Some(i) = image {
                    out.push_str(&format!("{which} image {}\n", pinned_line(i)));
                }
            }
            out.push_str(&text::text(
                &up,
                text::Options {
                    diff: a.diff,
                    changed_only: a.changed_only,
                },
            ));
            out
        }
        UpgradePlanFormat::Json => {
            let mut v = json::json(&up, a.diff);
            if let Some(o) = v.as_object_mut() {
                for (key, image) in [("oldImage", &old_image), ("newImage", &new_image)] {
                    if let Some(i) = image {
                        o.insert(key.into(), image_json(i));
                    }
                }
            }
            let mut s = serde_json::to_string_pretty(&v)?;
            s.push('\n');
            s
        }
        UpgradePlanFormat::Dot => dot::dot(&up),
    };
    print(&out)?;
    super::keep_until_exit((up, old, new, out, cache));
    Ok(ExitCode::SUCCESS)
}
