//! Which GPUs to plan for (`--gpu`, `--gpu-file`).
//!
//! Contract: `--gpu` is `all` or comma-separated names. Names are looked up
//! first among the entries of `--gpu-file` (a RON list of `GpuSpec`, checked
//! by `calibration::datasheet::load_user_entries`), then in the built-in
//! table; `all` is every table entry followed by the file's entries not
//! already named in the table. Without `--gpu`, the file's entries are used.
//! Unknown or repeated names fail listing the names that exist.

use super::error::PlanError;
use calibration::datasheet;
use sim::GpuSpec;
use std::path::Path;

/// The GPUs `gpu` and `gpu_file` select, in the order given.
pub fn select(gpu: Option<&str>, gpu_file: Option<&Path>) -> Result<Vec<GpuSpec>, PlanError> {
    let user = match gpu_file {
        Some(path) => datasheet::load_user_entries(path)?,
        None => Vec::new(),
    };
    let table = datasheet::all();
    let known = || {
        let mut names: Vec<String> = user.iter().map(|g| g.name.clone()).collect();
        names.extend(table.iter().map(|g| g.name.clone()));
        names.join(", ")
    };
    let Some(spec) = gpu.map(str::trim) else {
        if user.is_empty() {
            return Err(PlanError::Gpu(format!(
                "give --gpu NAME[,NAME...] or `all` (or --gpu-file FILE.ron); known GPUs: {}",
                known()
            )));
        }
        return Ok(user);
    };
    if spec == "all" {
        let mut out = table.clone();
        out.extend(
            user.iter()
                .filter(|u| table.iter().all(|t| t.name != u.name))
                .cloned(),
        );
        return Ok(out);
    }
    let mut out: Vec<GpuSpec> = Vec::new();
    for name in spec.split(',').map(str::trim) {
        if name.is_empty() {
            return Err(PlanError::Gpu(format!(
                "`{spec}` has an empty name; known GPUs: {}",
                known()
            )));
        }
        if out.iter().any(|g| g.name == name) {
            return Err(PlanError::Gpu(format!("{name} is named twice")));
        }
        let found = user
            .iter()
            .chain(table.iter())
            .find(|g| g.name == name)
            .cloned()
            .ok_or_else(|| {
                PlanError::Gpu(format!("unknown GPU `{name}`; known GPUs: {}", known()))
            })?;
        out.push(found);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lists_and_all() {
        let one = select(Some("h200-sxm"), None).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].name, "h200-sxm");
        let names = datasheet::known_names();
        let two = format!("{}, {}", names[1], names[0]);
        let got: Vec<String> = select(Some(&two), None)
            .unwrap()
            .into_iter()
            .map(|g| g.name)
            .collect();
        assert_eq!(got, vec![names[1].clone(), names[0].clone()]);
        assert_eq!(select(Some("all"), None).unwrap().len(), names.len());
    }

    #[test]
    fn bad_names_fail_listing_known_ones() {
        let msg = select(Some("h200-sxm,rtx-9999"), None)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("--gpu") && msg.contains("rtx-9999") && msg.contains("h200-sxm"),
            "{msg}"
        );
        let msg = select(Some("h200-sxm,,a100"), None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("empty name"), "{msg}");
        let msg = select(Some("h200-sxm,h200-sxm"), None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("twice"), "{msg}");
        let msg = select(None, None).unwrap_err().to_string();
        assert!(msg.contains("--gpu"), "{msg}");
    }
}
