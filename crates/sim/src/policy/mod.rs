//! Registry of bottom-half policies selectable with `[policy] bottom_half
//! = "<name>"` in a scenario. Each policy is a [`BottomHalfPolicy`] in its
//! own module here; add one by writing the module and one match arm in
//! [`bottom_half_policy`]. Its parameters are the other keys of the
//! `[policy]` table.

pub mod bh_threshold;
pub mod process_aware;

use crate::kernel::Sim;
use crate::softirq::BottomHalfPolicy;

/// Builds the named policy for `sim` from the `[policy]` table's keys.
/// `Ok(None)` is vanilla Linux (no policy hook at all).
pub fn bottom_half_policy(name: &str, _params: &toml::Table, _sim: &Sim) -> Result<Option<Box<dyn BottomHalfPolicy>>, String> {
    match name {
        "none" | "vanilla" => Ok(None),
        "bh-threshold" => Ok(Some(Box::new(bh_threshold::BhThreshold::from_params(_params)?))),
        "process-aware" => Ok(Some(Box::new(process_aware::ProcessAware::from_params(_params, _sim)?))),
        other => Err(format!("unknown bottom-half policy `{other}` (known: none, bh-threshold, process-aware)")),
    }
}
