//! One manifest file's text through the loader's parse and checks, then, when it loads, through
//! the pure rest of the pipeline: load-time filters, the plan in every mode, and every output.
//! The same text is also read as `release-metadata`, `image-references` and a `manifests/`
//! template. No input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use minicvo::payload::{metadata, parse_manifest_text, template};
use minicvo::{Filters, Mode, Payload, output, plan};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = metadata::parse_release_metadata("release-metadata", text);
    let _ = metadata::parse_image_references("image-references", text);
    let _ = template::render(text, &template::TemplateData::default());
    let name = if text.trim_start().starts_with('{') {
        "0000_10_fuzz_00_x.json"
    } else {
        "0000_10_fuzz_00_x.yaml"
    };
    let Ok(manifests) = parse_manifest_text(name, text) else {
        return;
    };
    let filters = Filters::default();
    for m in &manifests {
        let _ = filters.include_at_load(m, Some(4));
    }
    for (mode, attempt) in [
        (Mode::Updating, 0),
        (Mode::Initializing, 0),
        (Mode::Reconciling, 13),
    ] {
        let payload = Payload {
            root: "fuzz".into(),
            metadata: None,
            image_references: None,
            manifests: manifests.clone(),
            excluded: Vec::new(),
            warnings: Vec::new(),
            release_version: None,
        };
        let plan = plan::from_payload(payload, &filters, mode, attempt);
        let _ = output::text::plan(&plan);
        let _ = output::json::plan(&plan);
        let _ = output::dot::plan(&plan);
    }
    let refs: Vec<&minicvo::Manifest> = manifests.iter().collect();
    let _ = output::render::yaml(&refs);
    let _ = output::render::list(&refs);
});
