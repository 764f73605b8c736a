//! The harness is itself tested: the example backend with one planted bug (see [`Bug`]) must
//! fail the suite exactly in the cells the bug touches, with a counterexample shrunk to a few
//! elements, and `Checked<Planted, Cpu>` must report the divergence as a typed error.

mod casts;
mod checked;
mod classes;
mod planted;
mod suite;

use planted::{Bug, Planted};
use tessera_backend_example::ExampleBackend;

/// The example backend carrying `bug`.
pub fn planted(bug: Bug) -> Planted<ExampleBackend> {
    Planted::new(ExampleBackend::new(), bug)
}
