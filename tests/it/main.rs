//! minicvo's integration tests: one test binary (`cargo test --test it [FILTER]`), one module
//! per topic, and one [`support`] module shared by all of them.
//!
//! Cluster tests run against the real test control plane started by `hack/test.sh` (see
//! `hack/TESTPLANE.md`); offline tests (loading, planning, CLI snapshots) need no cluster. Run
//! one topic with a module filter, e.g. `hack/test.sh --test it cluster_smoke::`.

mod support;

mod apply_cluster_version_real_crd;
mod apply_crd;
mod apply_create_only;
mod apply_cvo_cluster_config;
mod apply_cvo_end_state;
mod apply_cvo_requests;
mod apply_delete;
mod apply_delete_cvo;
mod apply_failure;
mod apply_forbidden;
mod apply_implicit_capabilities;
mod apply_interrupt;
mod apply_mode_from_cluster;
mod apply_parallel;
mod apply_preflight;
mod apply_sample;
mod apply_wait;
mod apply_waits_release_workers;
mod bad_images;
mod bad_input;
mod cli_analysis;
mod cli_completions;
mod cli_implicit_capabilities;
mod cli_not_rolled_out;
mod cli_plan;
mod cli_rights_narrowed;
mod cli_schema;
mod cluster_diff;
mod cluster_smoke;
mod cluster_version_real_crd;
mod conformance;
mod e2e_apply_hooks;
mod e2e_clean;
mod e2e_cli;
mod e2e_harm;
mod e2e_implicit_capabilities;
mod e2e_real_release;
mod e2e_upgrade;
mod fuzz_corpus;
mod lint_harm_shapes;
mod load_decoder_differential;
mod load_errors;
mod load_headers;
mod load_shared;
mod merge_cluster;
mod merge_cluster_kinds;
mod node_harm_differential;
mod node_mco_story;
mod node_rollout;
mod node_standin;
mod node_teardown;
mod operator;
mod plan_cvo_fixture;
mod plan_properties;
mod release_image;
mod reliability;
mod schema_differential;
mod schema_early;
mod security;
mod template_go;
