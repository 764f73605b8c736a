//! The conformance suite: every op family checked on one backend, with a capability
//! declaration, a coverage matrix and persisted regressions. Most users only write
//! [`conformance_suite!`](crate::conformance_suite); the functions here are what it calls, for
//! harnesses that want the matrix as a value ([`run_family`], [`run_all`]).

mod capabilities;
mod cell;
pub mod contract;
mod coverage;
mod macros;
mod op;
mod run;

pub use capabilities::Capabilities;
pub use cell::{check_cell, property_name};
pub use coverage::{Coverage, CoverageRow, Outcome};
pub use op::{Family, Op};
pub use run::{assert_family, report_path, run_all, run_family};
