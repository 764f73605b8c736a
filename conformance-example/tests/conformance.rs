//! Every op family of the conformance suite on the example backend, from outside the Tessera
//! workspace. Failing seeds are saved under `proptest-regressions/example/` next to this crate's
//! Cargo.toml; commit them.

tests::conformance_suite!(
    backend_example::ExampleBackend,
    backend_example::ExampleBackend::new
);
