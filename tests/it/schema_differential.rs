//! Offline schema validation against the real API server: every object of the corpus under
//! every profile, and generated mutations of them, checked by `lint`'s validator and by a
//! server-side dry-run create with `fieldValidation=Strict`; the verdicts must agree.
//!
//! The corpus CRDs are installed under private groups (`<group>.c<N>.<run>.test`, schemas
//! unchanged, one group per distinct CRD content), so the OpenShift names other tests use for
//! their stand-ins stay free; the custom resources are rewritten to those groups. Namespaced
//! objects are created in the test's namespace. A request the server answers with anything
//! but success, 400 or 422 (AlreadyExists of a cluster-scoped name, say) has no validation
//! verdict and is counted apart; so is an object whose kind `lint` has no schema for.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{StreamExt, stream};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::discovery::{ApiResource, Scope, pinned_kind};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, core::GroupVersionKind};
use minicvo::Payload;
use minicvo::analysis::lint::{Context, applies, schema};
use minicvo::analysis::profiles_seen;
use minicvo::payload::{LoadOptions, load_unfiltered};
use minicvo::schema::{BuiltIn, Catalog};
use minicvo::{Filters, Mode, plan};
use rayon::prelude::*;
use serde_json::{Value, json};

fn corpora() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/payloads");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("release-manifests").is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 6, "corpus incomplete: {dirs:?}");
    dirs
}

/// One object to check: what `lint` says and what to send.
struct Case {
    label: String,
    mutation: Option<&'static str>,
    /// `None`: lint has no schema for the kind.
    lint: Option<bool>,
    lint_says: String,
    object: Value,
}

/// The group a CRD of this content is installed under.
struct Groups {
    run: String,
    contents: Vec<String>,
    crds: Vec<Value>,
}

impl Groups {
    fn group_of(&mut self, crd: &Value) -> String {
        let spec = serde_json::to_string(&crd["spec"]).expect("json");
        let n = match self.contents.iter().position(|c| *c == spec) {
            Some(n) => n,
            None => {
                self.contents.push(spec);
                self.crds.push(crd.clone());
                self.contents.len() - 1
            }
        };
        let group = crd["spec"]["group"].as_str().expect("CRD group");
        format!("{group}.c{n}.{}.test", self.run)
    }
}

fn rewrite_crd(crd: &Value, group: &str) -> Value {
    let mut c = crd.clone();
    let plural = c["spec"]["names"]["plural"]
        .as_str()
        .expect("plural")
        .to_owned();
    c["spec"]["group"] = json!(group);
    c["metadata"] = json!({"name": format!("{plural}.{group}")});
    if let Some(spec) = c["spec"].as_object_mut() {
        spec.remove("conversion");
    }
    if let Some(o) = c.as_object_mut() {
        o.remove("status");
    }
    c
}

/// Mutations of one object, each named.
fn mutations(object: &Value, seed: usize) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    let body_keys: Vec<String> = object
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|k| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    // Unknown field, in spec when there is one.
    let mut m = object.clone();
    if m["spec"].is_object() {
        m["spec"]["bogusField"] = json!("x");
    } else {
        m["bogusField"] = json!("x");
    }
    out.push(("unknown-field", m));
    // Bad name.
    let mut m = object.clone();
    let bad = ["Bad_Name", "a/b", "UPPER", "-lead", "x.y..z"][seed % 5];
    m["metadata"]["name"] = json!(bad);
    out.push(("bad-name", m));
    // Leaves below the body, for type, enum and required mutations.
    let mut leaves = Vec::new();
    for k in &body_keys {
        collect_leaves(&object[k], &mut vec![k.clone()], &mut leaves);
    }
    if !leaves.is_empty() {
        let path = &leaves[seed % leaves.len()];
        let mut m = object.clone();
        let slot = slot(&mut m, path);
        *slot = match slot {
            Value::String(_) => json!(12345),
            _ => json!("not-a-number"),
        };
        out.push(("wrong-type", m));
        let mut m = object.clone();
        remove(&mut m, path);
        out.push(("missing-field", m));
    }
    let enums: Vec<&Vec<String>> = leaves
        .iter()
        .filter(|p| {
            lookup(object, p)
                .as_str()
                .is_some_and(|s| s.len() > 1 && s.starts_with(|c: char| c.is_ascii_uppercase()))
        })
        .collect();
    if !enums.is_empty() {
        let path = enums[seed % enums.len()];
        let mut m = object.clone();
        *slot(&mut m, path) = json!("NotAValue");
        out.push(("bad-enum", m));
    }
    out
}

fn collect_leaves(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                path.push(k.clone());
                collect_leaves(x, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(format!("#{i}"));
                collect_leaves(x, path, out);
                path.pop();
            }
        }
        Value::Null => {}
        _ => out.push(path.clone()),
    }
}

fn lookup<'a>(v: &'a Value, path: &[String]) -> &'a Value {
    path.iter().fold(v, |v, k| match k.strip_prefix('#') {
        Some(i) => &v[i.parse::<usize>().expect("index")],
        None => &v[k.as_str()],
    })
}

fn slot<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(v, |v, k| match k.strip_prefix('#') {
        Some(i) => &mut v[i.parse::<usize>().expect("index")],
        None => &mut v[k.as_str()],
    })
}

fn remove(v: &mut Value, path: &[String]) {
    let (last, parent) = path.split_last().expect("path");
    let parent = slot(v, parent);
    match (last.strip_prefix('#'), parent) {
        (Some(i), Value::Array(a)) => {
            a.remove(i.parse::<usize>().expect("index"));
        }
        (None, Value::Object(o)) => {
            o.remove(last);
        }
        _ => {}
    }
}

/// The server's verdict: `Some(true)` refused by validation, `Some(false)` accepted, `None`
/// no validation verdict (with the reason).
async fn server_verdict(
    client: &Client,
    resources: &HashMap<String, (ApiResource, bool)>,
    namespace: &str,
    object: &Value,
) -> Result<(bool, String), String> {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let kind = object["kind"].as_str().unwrap_or("");
    let Some((ar, namespaced)) = resources.get(&format!("{api_version}/{kind}")) else {
        return Err(format!("not served: {api_version} {kind}"));
    };
    let mut object = object.clone();
    let prefix = if ar.group.is_empty() {
        format!("/api/{}", ar.version)
    } else {
        format!("/apis/{}/{}", ar.group, ar.version)
    };
    let url = if *namespaced {
        object["metadata"]["namespace"] = json!(namespace);
        format!("{prefix}/namespaces/{namespace}/{}", ar.plural)
    } else {
        format!("{prefix}/{}", ar.plural)
    };
    let request = http::Request::post(format!("{url}?dryRun=All&fieldValidation=Strict"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&object).expect("json"))
        .expect("request");
    match client.request::<Value>(request).await {
        Ok(_) => Ok((false, String::new())),
        Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 => Ok((true, e.message)),
        Err(kube::Error::Api(e)) => Err(format!("{} {}", e.code, e.reason)),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lint_agrees_with_the_api_server_on_the_corpus_and_its_mutations() {
    let client = support::admin_client().await;
    let namespace = support::test_namespace(&client, "schema-diff").await;
    let run = support::unique_name("r");
    let builtin = Arc::new(BuiltIn::load(minicvo::schema::DEFAULT_KUBE_VERSION).expect("schemas"));
    let mut groups = Groups {
        run,
        contents: Vec::new(),
        crds: Vec::new(),
    };

    // Every object of every corpus under every profile, as lint sees it (in parallel, one
    // payload and profile per job), then the CRDs' private groups and the rewritten objects.
    // Each corpus is read once, and again for each other profile when it has a templated
    // `manifests/` directory (`{{ .ClusterProfile }}` renders per profile); a profile then
    // filters.
    let mut jobs = Vec::new();
    for dir in corpora() {
        let all = Arc::new(load_unfiltered(&dir, &LoadOptions::default()).expect("corpus loads"));
        let templated = dir.join("manifests").is_dir();
        for p in profiles_seen(&all) {
            let rendered = if templated && p != LoadOptions::default().filters.profile {
                let options = LoadOptions {
                    filters: Filters {
                        profile: p.clone(),
                        ..Filters::default()
                    },
                    ..LoadOptions::default()
                };
                Arc::new(load_unfiltered(&dir, &options).expect("corpus loads"))
            } else {
                all.clone()
            };
            jobs.push((dir.clone(), rendered, p));
        }
    }
    let checked: Vec<Profiled> = jobs
        .par_iter()
        .map(|(dir, all, profile)| lint_profile(&builtin, dir, all, profile))
        .collect();
    let mut cases: Vec<Case> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut no_schema = 0;
    for p in checked {
        let mut regroup: BTreeMap<(String, String), String> = BTreeMap::new();
        for crd in &p.crds {
            let g = groups.group_of(crd);
            regroup.insert(
                (
                    crd["spec"]["group"].as_str().unwrap().to_owned(),
                    crd["spec"]["names"]["kind"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                ),
                g,
            );
        }
        for mut c in p.cases {
            c.object = regrouped(&regroup, &groups.run, &c.object);
            if !seen.insert(serde_json::to_string(&c.object).unwrap()) {
                continue;
            }
            if c.lint.is_none() {
                no_schema += 1;
                continue;
            }
            cases.push(c);
        }
    }
    let used: std::collections::HashSet<&str> = cases
        .iter()
        .filter_map(|c| c.object["apiVersion"].as_str())
        .filter_map(|av| av.rsplit_once('/').map(|(g, _)| g))
        .collect();
    // Install the CRDs under their private groups and wait until they are established.
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let wanted: Vec<(usize, &Value)> = groups
        .crds
        .iter()
        .enumerate()
        .filter(|(n, crd)| {
            let g = crd["spec"]["group"].as_str().unwrap();
            used.contains(format!("{g}.c{n}.{}.test", groups.run).as_str())
        })
        .collect();
    let installed: Vec<String> = stream::iter(wanted)
        .map(|(n, crd)| {
            let crd_api = crd_api.clone();
            let group = format!(
                "{}.c{n}.{}.test",
                crd["spec"]["group"].as_str().unwrap(),
                groups.run
            );
            let c: CustomResourceDefinition =
                serde_json::from_value(rewrite_crd(crd, &group)).expect("CRD decodes");
            async move {
                let name = c.metadata.name.clone().unwrap();
                crd_api
                    .create(&PostParams::default(), &c)
                    .await
                    .unwrap_or_else(|e| panic!("install {name}: {e}"));
                tokio::time::timeout(
                    std::time::Duration::from_secs(60),
                    await_condition(crd_api.clone(), &name, conditions::is_crd_established()),
                )
                .await
                .unwrap_or_else(|_| panic!("CRD {name} not established"))
                .expect("watch");
                name
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;

    // Resource names and scopes of every kind sent.
    let mut resources: HashMap<String, (ApiResource, bool)> = HashMap::new();
    for c in &cases {
        let av = c.object["apiVersion"].as_str().unwrap_or("").to_owned();
        let kind = c.object["kind"].as_str().unwrap_or("").to_owned();
        let key = format!("{av}/{kind}");
        if resources.contains_key(&key) {
            continue;
        }
        let (g, v) = av.rsplit_once('/').unwrap_or(("", &av));
        if let Ok((ar, caps)) = pinned_kind(&client, &GroupVersionKind::gvk(g, v, &kind)).await {
            resources.insert(key, (ar, caps.scope == Scope::Namespaced));
        }
    }

    // Ask the server, in parallel.
    let verdicts: Vec<Result<(bool, String), String>> = stream::iter(cases.iter())
        .map(|c| server_verdict(&client, &resources, &namespace, &c.object))
        .buffered(32)
        .collect()
        .await;

    for name in &installed {
        let _ = crd_api.delete(name, &DeleteParams::default()).await;
    }

    let mut report = String::new();
    let (mut compared, mut agree, mut corpus_fp, mut mutated_compared) = (0, 0, 0, 0);
    let mut excluded: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_mutation: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (c, v) in cases.iter().zip(&verdicts) {
        let (server, server_says) = match v {
            Ok(s) => s.clone(),
            Err(reason) => {
                *excluded.entry(reason.clone()).or_default() += 1;
                continue;
            }
        };
        compared += 1;
        let kind = c.mutation.unwrap_or("corpus");
        let e = by_mutation.entry(kind).or_default();
        e.0 += 1;
        if c.mutation.is_some() {
            mutated_compared += 1;
        }
        let lint = c.lint == Some(true);
        if server == lint {
            agree += 1;
            e.1 += 1;
        } else {
            if c.mutation.is_none() && lint {
                corpus_fp += 1;
            }
            let _ = writeln!(
                report,
                "{} [{kind}] {} {}: lint {} ({}), server {} ({})",
                c.label,
                c.object["kind"].as_str().unwrap_or(""),
                c.object["metadata"]["name"],
                if lint { "rejects" } else { "accepts" },
                c.lint_says,
                if server { "rejects" } else { "accepts" },
                server_says,
            );
        }
    }
    let pct = 100.0 * f64::from(agree) / f64::from(compared.max(1));
    let mut summary = format!(
        "compared {compared} ({mutated_compared} mutations), agree {agree} ({pct:.2}%), corpus false positives {corpus_fp}, lint has no schema {no_schema}, CRDs installed {}\n",
        installed.len()
    );
    for (k, (n, a)) in &by_mutation {
        let _ = writeln!(summary, "  {k}: {a}/{n} agree");
    }
    for (reason, n) in &excluded {
        let _ = writeln!(summary, "  excluded ({reason}): {n}");
    }
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/schema-differential.txt");
    let _ = std::fs::write(&out, format!("{summary}\n{report}"));
    println!("{summary}\n{report}");
    assert!(mutated_compared >= 500, "{summary}");
    assert_eq!(
        corpus_fp, 0,
        "false positives on the corpus:\n{summary}\n{report}"
    );
    assert!(pct >= 98.0, "agreement below 98%:\n{summary}\n{report}");
}

/// One payload under one profile, checked by lint.
struct Profiled {
    /// The CRDs the profile applies.
    crds: Vec<Value>,
    /// Its objects and their mutations, not yet rewritten.
    cases: Vec<Case>,
}

fn lint_profile(builtin: &Arc<BuiltIn>, dir: &Path, all: &Payload, profile: &str) -> Profiled {
    let payload_name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let filters = Filters {
        profile: profile.to_owned(),
        ..Filters::default()
    };
    let major = all.metadata.as_ref().map(|m| m.version.major);
    let payload = Payload {
        manifests: all
            .manifests
            .iter()
            .filter(|m| filters.include_at_load(m, major).is_ok())
            .cloned()
            .collect(),
        excluded: Vec::new(),
        ..all.clone()
    };
    let plan = plan::build(&payload, &filters, Mode::Updating, 0);
    let cx = Context::new(&plan, &payload.excluded, None);
    let catalog: Catalog = schema::catalog(builtin.clone(), &cx, &[]).expect("catalog");
    let crds = plan
        .tasks
        .iter()
        .filter(|t| applies(t) && t.manifest.is_crd())
        .map(|t| serde_json::Value::clone(&t.manifest.object))
        .collect();
    let mut cases = Vec::new();
    for (i, t) in plan.tasks.iter().enumerate().filter(|(_, t)| applies(t)) {
        let m = &t.manifest;
        let label = format!("{payload_name}/{}#{}", m.path(), m.document);
        let mut variants = vec![(None, serde_json::Value::clone(&m.object))];
        let all = mutations(&m.object, i);
        // One mutation per object, two for every fourth one.
        let picked = [
            i % all.len(),
            if i % 4 == 0 {
                (i + 2) % all.len()
            } else {
                i % all.len()
            },
        ];
        variants.extend(
            all.into_iter()
                .enumerate()
                .filter(|(k, _)| picked.contains(k))
                .map(|(_, (n, o))| (Some(n), o)),
        );
        for (mutation, object) in variants {
            let verdict = catalog.validate(&object);
            let lint_says = match &verdict {
                minicvo::schema::Verdict::Checked { violations, .. } => violations
                    .iter()
                    .filter(|v| !v.warning)
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
                minicvo::schema::Verdict::NoSchema => String::new(),
            };
            cases.push(Case {
                label: label.clone(),
                mutation,
                lint: verdict.rejected(),
                lint_says,
                object,
            });
        }
    }
    Profiled { crds, cases }
}

/// `o` as sent: a CRD under a group nothing installs, a custom resource under the private
/// group of its CRD.
fn regrouped(regroup: &BTreeMap<(String, String), String>, run: &str, o: &Value) -> Value {
    let mut o = o.clone();
    if o["kind"] == "CustomResourceDefinition" {
        let g = o["spec"]["group"].as_str().unwrap_or("").to_owned();
        if o["spec"]["names"]["plural"].is_string() {
            return rewrite_crd(&o, &format!("{g}.crd.{run}.test"));
        }
        return o;
    }
    let av = o["apiVersion"].as_str().unwrap_or("").to_owned();
    let kind = o["kind"].as_str().unwrap_or("").to_owned();
    if let Some((g, v)) = av.rsplit_once('/')
        && let Some(new) = regroup.get(&(g.to_owned(), kind))
    {
        o["apiVersion"] = json!(format!("{new}/{v}"));
    }
    o
}
