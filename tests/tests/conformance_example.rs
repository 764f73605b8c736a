//! The whole conformance suite on the example backend (`backend-example`), the template in
//! docs/BACKENDS.md: it must pass every family.

tests::conformance_suite!(
    backend_example::ExampleBackend,
    backend_example::ExampleBackend::new
);
