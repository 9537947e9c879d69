//! The feature set and gates a command that talks to a cluster filters with: the flags where
//! given, else the cluster's FeatureGate `cluster`, as the CVO does
//! ([`minicvo::cvo::features`]). Printed as `features: …`, as the mode is.

use std::time::Duration;

use minicvo::apply::actions::cvo::read_feature_gate;
use minicvo::cluster::retry::RetryPolicy;
use minicvo::cvo::features::{self, Explicit, Features};
use minicvo::{LoadOptions, Payload};

use super::args::{FilterArgs, PayloadArgs};

/// Which of the feature set and gates the flags give.
pub fn explicit(filters: &FilterArgs) -> Explicit {
    Explicit {
        feature_set: !filters.feature_set.is_empty(),
        gates: filters.feature_gates.is_some(),
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
    let explicit = explicit(&args.filters);
    let feature_gate = if explicit.all() {
        None
    } else {
        match read_feature_gate(client, Duration::from_secs(60), &RetryPolicy::default()).await {
            Ok(fg) => fg,
            // A user who may not read it gets the default of a cluster without it, and a
            // warning: the CVO always reads it.
            Err(e) if e.source.is(403) => {
                tracing::warn!(
                    "{e}; taken as absent\nhint: pass --feature-set and --feature-gates"
                );
                None
            }
            Err(e) => {
                return Err(anyhow::anyhow!(
                    "{e}\nhint: pass --feature-set and --feature-gates"
                ));
            }
        }
    };
    let version = payload.version().unwrap_or_default();
    let chosen = features::for_run(&options.filters, explicit, feature_gate.as_ref(), &version);
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
