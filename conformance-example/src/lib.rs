//! An out-of-tree crate using Tessera's conformance harness. All it has is its test,
//! `tests/conformance.rs`: one line that checks `tessera_backend_example::ExampleBackend` against the
//! reference. Replace the backend with yours.
