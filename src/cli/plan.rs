//! `minicvo plan` and `minicvo render`.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use minicvo::{Mode, ObjectDetail, output, plan};

use super::args::{PayloadArgs, parse_mode};

/// Output format of `plan`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PlanFormat {
    /// Stages, nodes and tasks for people.
    Text,
    /// The `Plan` JSON contract.
    Json,
    /// Graphviz DOT.
    Dot,
}

/// Arguments of `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub payload: PayloadArgs,
    /// Which CVO graph to build.
    #[arg(long, default_value = "updating", value_parser = parse_mode)]
    pub mode: Mode,
    /// The CVO's attempt counter for reconciling mode (permutation seed attempt/8, rotation
    /// attempt%8).
    #[arg(long, default_value_t = 0)]
    pub seed: usize,
    /// The payload the cluster runs now: capabilities the update implicitly enables (an
    /// object the cluster runs moved under a capability that is off) are enabled in the plan.
    #[arg(long, value_name = "PAYLOAD")]
    pub previous: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: PlanFormat,
}

/// Output format of `render`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RenderFormat {
    /// Multi-document YAML.
    Yaml,
    /// A `v1` `List`.
    Json,
}

/// Arguments of `render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub payload: PayloadArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "yaml")]
    pub output: RenderFormat,
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error.
pub(super) fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// Runs `plan`.
///
/// # Errors
/// Load errors.
pub fn plan(a: &PlanArgs) -> anyhow::Result<ExitCode> {
    // Planning reads only the objects' headers (see `ObjectDetail::Headers`).
    let (payload, options, image) = a.payload.load_image(false, ObjectDetail::Headers)?;
    let mut filters = options.filters;
    if let Some(previous) = &a.previous {
        let mut prev_args = a.payload.clone();
        prev_args.payload.clone_from(previous);
        let (old, _, _) = prev_args.load_image(false, ObjectDetail::Headers)?;
        let implicit;
        (filters, implicit) =
            minicvo::cvo::capabilities::with_implicit(&filters, &payload.manifests, &old.manifests);
        for line in minicvo::cvo::capabilities::describe(&implicit) {
            eprintln!("note: {line}");
        }
    }
    let plan = plan::from_payload(payload, &filters, a.mode, a.seed);
    let text = match a.output {
        PlanFormat::Text => match &image {
            Some(i) => format!("Image {}\n{}", pinned_line(i), output::text::plan(&plan)),
            None => output::text::plan(&plan),
        },
        PlanFormat::Json => match &image {
            Some(i) => {
                let mut v = output::json::plan(&plan);
                if let Some(o) = v.as_object_mut() {
                    o.insert("image".into(), super::args::image_json(i));
                }
                let mut s = serde_json::to_string_pretty(&v)?;
                s.push('\n');
                s
            }
            None => {
                // Streamed: no `Value` tree of every task (see `write_plan`).
                let mut out = Vec::with_capacity(256 * plan.tasks.len() + 4096);
                output::json::write_plan(&plan, &mut out)?;
                out.push(b'\n');
                String::from_utf8(out)?
            }
        },
        PlanFormat::Dot => output::dot::plan(&plan),
    };
    print(&text)?;
    super::keep_until_exit((plan, text));
    Ok(ExitCode::SUCCESS)
}

/// `PULLSPEC@DIGEST [(platform, manifest DIGEST)]` for text outputs.
pub(super) fn pinned_line(i: &minicvo::image::ImageInfo) -> String {
    match &i.platform {
        Some(p) => format!("{} ({p}, manifest {})", i.pinned, i.manifest_digest),
        None => i.pinned.clone(),
    }
}

/// Runs `render`: the objects that are applied, in task order (apply-time skips left out).
///
/// # Errors
/// Load errors.
pub fn render(a: &RenderArgs) -> anyhow::Result<ExitCode> {
    let (payload, options) = a.payload.load(true)?;
    let plan = plan::from_payload(payload, &options.filters, Mode::Updating, 0);
    let objects: Vec<&minicvo::Manifest> = plan
        .tasks
        .iter()
        .filter(|t| t.action != minicvo::Action::Skip)
        .map(|t| &t.manifest)
        .collect();
    let text = match a.output {
        RenderFormat::Yaml => output::render::yaml(&objects)?,
        RenderFormat::Json => {
            let mut s = serde_json::to_string_pretty(&output::render::list(&objects))?;
            s.push('\n');
            s
        }
    };
    print(&text)?;
    drop(objects);
    super::keep_until_exit((plan, text));
    Ok(ExitCode::SUCCESS)
}
