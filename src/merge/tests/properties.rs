//! Properties of the merge over generated Deployments.

use proptest::prelude::*;

use serde_json::json;

use super::*;

fn arb_deployment() -> impl Strategy<Value = Value> {
    (
        proptest::option::of(0..5i64),
        proptest::collection::btree_map("[a-c]", "[a-c]", 0..3),
        proptest::collection::vec(("[a-c]", "[a-c]", proptest::bool::ANY), 0..3),
        proptest::collection::vec("[a-c]", 0..3),
    )
        .prop_map(|(replicas, labels, containers, tolerations)| {
            let cs: Vec<Value> = containers
                .into_iter()
                .map(|(n, img, probe)| {
                    let mut c = json!({"name": n, "image": img, "env": [{"name": "E", "value": img}],
                                       "volumeMounts": [{"name": "v", "mountPath": format!("/{n}")}]});
                    if probe {
                        c["livenessProbe"] = json!({"httpGet": {"port": 8}});
                    }
                    c
                })
                .collect();
            let mut spec = json!({"template": {"metadata": {"labels": labels},
                "spec": {"containers": cs, "tolerations": tolerations.iter().map(|t| json!({"key": t})).collect::<Vec<_>>(),
                         "volumes": [{"name": "v", "secret": {"secretName": "s"}}]}}});
            if let Some(r) = replicas {
                spec["replicas"] = json!(r);
            }
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": labels}, "spec": spec})
        })
}

proptest! {
    /// The merge converges: a third merge of the same manifest changes nothing. (Not the
    /// second: containers the first merge appends are copied verbatim and only the next merge
    /// defaults their probes, as in the CVO; on a cluster the API server defaults them first.)
    #[test]
    fn merge_converges(live in arb_deployment(), manifest in arb_deployment()) {
        let once = merge_prepared(&live, &manifest).unwrap().unwrap_or(live);
        let twice = merge_prepared(&once, &manifest).unwrap().unwrap_or(once);
        prop_assert_eq!(merge_prepared(&twice, &manifest).unwrap(), None);
    }

    /// The same for the generic rule.
    #[test]
    fn generic_merge_is_idempotent(a in proptest::collection::btree_map("[a-c]", "[a-c]", 0..3),
                                   b in proptest::collection::btree_map("[a-c]", "[a-c]", 0..3)) {
        let live = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": a}, "data": a});
        let manifest = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": b});
        let once = merge_prepared(&live, &manifest).unwrap().unwrap_or(live);
        prop_assert_eq!(merge_prepared(&once, &manifest).unwrap(), None);
    }
}
