//! The feature set and gates a command that talks to a cluster filters with: the flags where
//! given, else the cluster's FeatureGate `cluster`, as the CVO does
//! ([`minicvo::cvo::features`]). Printed as `features: …`, as the mode is.

use minicvo::cvo::features::{self, Features};
use minicvo::{LoadOptions, Payload};

use super::args::PayloadArgs;

/// FeatureGate `cluster` as the cluster has it (`None`: absent, or the kind is not served).
async fn read_feature_gate(client: &kube::Client) -> anyhow::Result<Option<serde_json::Value>> {
    let gvk = kube::api::GroupVersionKind::gvk("config.openshift.io", "v1", "FeatureGate");
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, "featuregates"),
    );
    match api.get_opt("cluster").await {
        Ok(fg) => Ok(fg.map(|o| serde_json::to_value(o).unwrap_or_default())),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(anyhow::anyhow!(
            "reading FeatureGate cluster: {e}\nhint: pass --feature-set and --feature-gates"
        )),
    }
}

/// The payload filtered with the run's features: loaded again when the cluster's FeatureGate
/// gives another feature set or other gates than the flags did. Prints the choice.
///
/// # Errors
/// The FeatureGate read, or the second load.
pub async fn payload_for_cluster(
    args: &PayloadArgs,
    client: &kube::Client,
    payload: Payload,
    options: LoadOptions,
) -> anyhow::Result<(Payload, LoadOptions, Features)> {
    let explicit_set = !args.filters.feature_set.is_empty();
    let explicit_gates = args.filters.feature_gates.is_some();
    let feature_gate = if explicit_set && explicit_gates {
        None
    } else {
        read_feature_gate(client).await?
    };
    let version = payload.version().unwrap_or_default();
    let chosen = features::for_run(
        &options.filters,
        explicit_set,
        explicit_gates,
        feature_gate.as_ref(),
        &version,
    );
    eprintln!("features: {chosen}");
    let same = chosen.feature_set == options.filters.feature_set
        && chosen.gates == options.filters.feature_gates;
    if same {
        return Ok((payload, options, chosen));
    }
    let filters = chosen.apply_to(&options.filters);
    let (payload, options) = args.load_filtered(options.substitute_placeholder, filters)?;
    Ok((payload, options, chosen))
}
