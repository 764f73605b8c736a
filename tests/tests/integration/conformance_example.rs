//! The whole conformance suite on the example backend (`backend-example`), the template in
//! docs/BACKENDS.md: it must pass every family.

tessera_conformance::conformance_suite!(
    tessera_backend_example::ExampleBackend,
    tessera_backend_example::ExampleBackend::new
);
