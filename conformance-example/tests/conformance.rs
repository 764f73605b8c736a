//! Every op family of the conformance suite on the example backend, from outside the Tessera
//! workspace. Failing seeds are saved under `proptest-regressions/example/` next to this crate's
//! Cargo.toml; commit them.

tessera_conformance::conformance_suite!(
    tessera_backend_example::ExampleBackend,
    tessera_backend_example::ExampleBackend::new
);
