//! Load + plan timing for `hack/bench.sh`: the minicvo side of the comparison with the CVO's
//! loader (`hack/tools/cvoload`). Prints the same `key=value` lines as cvoload.
//!
//! ```text
//! loadbench load [-n N] [--mode M] PAYLOAD     load + plan N times in this process
//! loadbench gen COUNT DIR [--replicas R] [--prefix P]
//!                                               write a synthetic payload of COUNT objects
//! ```
//!
//! Build with `cargo build --release --example loadbench`. This is a benchmark tool, not a
//! test: it asserts nothing about time.

#[path = "../benches/support/synthetic.rs"]
mod synthetic;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use minicvo::plan::{self, Mode};
use minicvo::{Filters, LoadOptions, load};

fn peak_rss_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        })
        .unwrap_or(-1)
}

fn median(xs: &[f64]) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        f64::midpoint(s[n / 2 - 1], s[n / 2])
    }
}

fn run_load(args: &[String]) -> Result<(), String> {
    let mut n = 1usize;
    let mut mode = Mode::Updating;
    let mut path = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-n" => {
                n = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("-n needs a number")?;
            }
            "--mode" => mode = it.next().ok_or("--mode needs a value")?.parse()?,
            p => path = Some(PathBuf::from(p)),
        }
    }
    let path = path.ok_or("missing PAYLOAD")?;
    let filters = Filters::default();
    let options = LoadOptions::default();
    let mut times = Vec::with_capacity(n);
    for i in 0..n.max(1) {
        let start = Instant::now();
        let payload = load(&path, &options).map_err(|e| e.to_string())?;
        let loaded = start.elapsed();
        let excluded = payload.excluded.len();
        let plan = plan::from_payload(payload, &filters, mode, 0);
        let elapsed = start.elapsed();
        let ms = elapsed.as_secs_f64() * 1000.0;
        times.push(ms);
        // Freeing the plan is outside the timed part, as the Go baseline's final free is.
        let freed = Instant::now();
        let (tasks, nodes) = (plan.tasks.len(), plan.graph.nodes.len());
        drop(plan);
        println!(
            "iteration={i} manifests={tasks} excluded={excluded} nodes={nodes} elapsed_ms={ms:.1} load_ms={:.1} plan_ms={:.1} drop_ms={:.1}",
            loaded.as_secs_f64() * 1000.0,
            (elapsed - loaded).as_secs_f64() * 1000.0,
            freed.elapsed().as_secs_f64() * 1000.0,
        );
    }
    println!(
        "summary tool=minicvo iterations={} first_ms={:.1} median_ms={:.1} min_ms={:.1} peak_rss_kib={} threads={}",
        times.len(),
        times[0],
        median(&times),
        times.iter().copied().fold(f64::INFINITY, f64::min),
        peak_rss_kib(),
        std::thread::available_parallelism().map_or(1, usize::from)
    );
    Ok(())
}

fn run_gen(args: &[String]) -> Result<(), String> {
    let mut replicas = 1;
    let mut prefix = None;
    let mut pos = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--replicas" => {
                replicas = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--replicas needs a number")?;
            }
            "--prefix" => prefix = Some(it.next().ok_or("--prefix needs a value")?.clone()),
            p => pos.push(p),
        }
    }
    let [count, dir] = pos[..] else {
        return Err("usage: loadbench gen COUNT DIR".to_string());
    };
    let count: usize = count.parse().map_err(|e| format!("COUNT: {e}"))?;
    let mut spec = synthetic::Spec::new(count);
    spec.replicas = replicas;
    if let Some(p) = prefix {
        spec.prefix = p;
    }
    let files = synthetic::write(&PathBuf::from(dir), &spec).map_err(|e| e.to_string())?;
    println!("generated objects={count} files={files} dir={dir}");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("load") => run_load(&args[1..]),
        Some("gen") => run_gen(&args[1..]),
        _ => {
            Err("usage: loadbench load [-n N] [--mode M] PAYLOAD | loadbench gen COUNT DIR".into())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadbench: {e}");
            ExitCode::FAILURE
        }
    }
}
