//! The in-process target: softhca's kernel half, opened like a uverbs file.
//!
//! `softhca::default_hca()` is the process's instance; `Hca::open()` gives a new uverbs
//! file on it (a [`softhca::File`], which implements [`uverbs::Endpoint`]).

use crate::{CaseResult, Profile};

/// Plays the table on softhca's default instance, opening a new uverbs file on it
/// whenever the table asks for one.
pub fn run_on_softhca(profile: &dyn Profile) -> std::io::Result<Vec<CaseResult>> {
    run_cases_on_softhca(&crate::table::cases(), profile)
}

/// Plays `cases` (the main table, or [`crate::table::dmabuf_cases`]) on softhca's
/// default instance, like [`run_on_softhca`].
pub fn run_cases_on_softhca(cases: &[crate::Case], profile: &dyn Profile) -> std::io::Result<Vec<CaseResult>> {
    let hca = softhca::default_hca()?;
    let open = || -> uverbs::Result<uverbs::Device> {
        Ok(uverbs::Device::from_endpoint(Box::new(hca.open()), "softhca0"))
    };
    Ok(crate::run_cases(cases, &open, profile))
}
