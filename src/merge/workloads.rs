//! Deployment, DaemonSet, Job and CronJob (`EnsureDeployment`, `EnsureDaemonSet`, `EnsureJob`,
//! `EnsureCronJob`).

use serde_json::{Value, json};

use super::MergeError;
use super::meta::ensure_object_meta;
use super::pod::ensure_pod_template;
use super::prim::{Merger, Obj, get, get_obj, get_str, obj_mut, sem_eq};

fn spec_of(req: &Obj) -> Obj {
    get_obj(req, "spec").cloned().unwrap_or_default()
}

fn template(m: &mut Merger, es: &mut Obj, rs: &Obj, at: &str) -> Result<(), MergeError> {
    let rt = get_obj(rs, "template").cloned().unwrap_or_default();
    ensure_pod_template(m, obj_mut(es, "template"), &rt, &format!("{at}.template"))
}

/// Selector as the Deployment merge does it: set when live has none, then replaced when not
/// semantically equal (which can clear it).
fn selector(m: &mut Merger, es: &mut Obj, rs: &Obj) {
    if get(es, "selector").is_none() && get(rs, "selector").is_some() {
        es.insert("selector".into(), rs["selector"].clone());
        m.modified = true;
    }
    m.replace(es, rs, "selector");
}

pub(crate) fn deployment(m: &mut Merger, ex: &mut Obj, req: &Obj) -> Result<(), MergeError> {
    ensure_object_meta(m, ex, req);
    let mut rs = spec_of(req);
    if get(&rs, "replicas").is_none() {
        rs.insert("replicas".into(), json!(1));
    }
    let es = obj_mut(ex, "spec");
    if get(es, "replicas").is_none() || !sem_eq(get(es, "replicas"), get(&rs, "replicas")) {
        es.insert("replicas".into(), rs["replicas"].clone());
        m.modified = true;
    }
    selector(m, es, &rs);
    m.set_scalar(es, &rs, "paused");
    m.set_scalar(es, &rs, "minReadySeconds");
    m.set_if_required(es, &rs, "revisionHistoryLimit");
    m.set_if_required(es, &rs, "progressDeadlineSeconds");
    let strategy = obj_mut(&mut rs, "strategy");
    let t = get_str(strategy, "type");
    if t.is_empty() || t == "RollingUpdate" {
        strategy.insert("type".into(), json!("RollingUpdate"));
        let ru = obj_mut(strategy, "rollingUpdate");
        for k in ["maxUnavailable", "maxSurge"] {
            if get(ru, k).is_none() {
                ru.insert(k.into(), json!("25%"));
            }
        }
    }
    m.replace(es, &rs, "strategy");
    template(m, es, &rs, "spec")
}

pub(crate) fn daemon_set(m: &mut Merger, ex: &mut Obj, req: &Obj) -> Result<(), MergeError> {
    ensure_object_meta(m, ex, req);
    let rs = spec_of(req);
    let es = obj_mut(ex, "spec");
    if get(es, "selector").is_none() {
        if let Some(s) = get(&rs, "selector") {
            es.insert("selector".into(), s.clone());
        }
        m.modified = true;
    }
    m.replace(es, &rs, "selector");
    template(m, es, &rs, "spec")
}

/// `ensureJobSpec`; `at` is the path of the Job spec for errors.
fn job_spec(m: &mut Merger, es: &mut Obj, rs: &Obj, at: &str) -> Result<(), MergeError> {
    if get(rs, "selector").is_some() {
        return Err(MergeError::JobSelector {
            object: String::new(),
            path: format!("{at}.selector"),
        });
    }
    let mut rs = rs.clone();
    for (k, d) in [
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
    ] {
        if get(&rs, k).is_none() {
            rs.insert(k.into(), d);
        }
    }
    for k in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "manualSelector",
        "ttlSecondsAfterFinished",
        "suspend",
    ] {
        m.set_ptr(es, &rs, k);
    }
    template(m, es, &rs, at)?;
    m.replace(es, &rs, "completionMode");
    m.replace(es, &rs, "podFailurePolicy");
    Ok(())
}

pub(crate) fn job(m: &mut Merger, ex: &mut Obj, req: &Obj) -> Result<(), MergeError> {
    ensure_object_meta(m, ex, req);
    job_spec(m, obj_mut(ex, "spec"), &spec_of(req), "spec")
}

pub(crate) fn cron_job(m: &mut Merger, ex: &mut Obj, req: &Obj) -> Result<(), MergeError> {
    ensure_object_meta(m, ex, req);
    let mut rs = spec_of(req);
    for (k, d) in [
        ("concurrencyPolicy", json!("Allow")),
        ("failedJobsHistoryLimit", json!(1)),
        ("successfulJobsHistoryLimit", json!(3)),
        ("suspend", json!(false)),
    ] {
        if get(&rs, k).is_none() || (k == "concurrencyPolicy" && get_str(&rs, k).is_empty()) {
            rs.insert(k.into(), d);
        }
    }
    let es = obj_mut(ex, "spec");
    for k in [
        "startingDeadlineSeconds",
        "suspend",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        m.set_ptr(es, &rs, k);
    }
    if get(es, "schedule") != get(&rs, "schedule") {
        es.insert(
            "schedule".into(),
            get(&rs, "schedule").cloned().unwrap_or(Value::from("")),
        );
        m.modified = true;
    }
    m.replace(es, &rs, "timeZone");
    m.set_scalar(es, &rs, "concurrencyPolicy");
    let rj = get_obj(&rs, "jobTemplate").cloned().unwrap_or_default();
    let ej = obj_mut(es, "jobTemplate");
    ensure_object_meta(m, ej, &rj);
    let rjs = get_obj(&rj, "spec").cloned().unwrap_or_default();
    job_spec(m, obj_mut(ej, "spec"), &rjs, "spec.jobTemplate.spec")
}
