//! [`conformance_suite!`](crate::conformance_suite): the one line a backend author writes.

/// Generates one `#[test]` per op family ([`Family::ALL`](crate::suite::Family::ALL): `device`,
/// `memory`, `unary`, ..., `gradients`, `metamorphic`) checking a backend against the reference.
///
/// ```ignore
/// // tests/conformance.rs of a backend crate:
/// tessera_conformance::conformance_suite!(MyBackend, || MyBackend::new());
///
/// // Declaring less than `supports_dtype` says (unsupported cells are reported, not run):
/// tessera_conformance::conformance_suite!(MyBackend, || MyBackend::new(), |dev: &MyBackend| {
///     tessera_conformance::suite::Capabilities::declared_by(dev).without_family(tessera_conformance::suite::Family::Conv)
/// });
/// ```
///
/// * `$backend`: the backend type; `$make`: an expression callable with no argument that
///   returns the device (a closure); `$capabilities` (optional): callable with `&$backend`,
///   returning a [`Capabilities`](crate::suite::Capabilities) (default:
///   [`Capabilities::declared_by`](crate::suite::Capabilities::declared_by)).
/// * Cases per property: 256, or `PROPTEST_CASES`. Seed: random per run, printed with every
///   failure; `PROPTEST_RNG_SEED=<seed>` replays a run exactly.
/// * Failing seeds are appended to `proptest-regressions/<backend name>/<property>.txt` in the
///   calling crate (commit them) and replayed first by every later run.
/// * Each test prints its coverage matrix (see it with `--nocapture`), writes it to
///   `target/<profile>/conformance/<test>/<backend>/<family>.txt`, and fails with the matrix
///   and the shrunk counterexamples if any declared (op, dtype) cell is wrong.
///
/// The tests are generated at the call site, so invoke the macro once per module (wrap it in
/// `mod my_backend { ... }` to check two backends in one file).
#[macro_export]
macro_rules! conformance_suite {
    ($backend:ty, $make:expr $(,)?) => {
        $crate::conformance_suite!($backend, $make, |dev: &$backend| {
            $crate::suite::Capabilities::declared_by(dev)
        });
    };
    ($backend:ty, $make:expr, $capabilities:expr $(,)?) => {
        $crate::__conformance_tests! {
            $backend, $make, $capabilities;
            device: Device,
            memory: Memory,
            unary: Unary,
            binary: Binary,
            comparison: Comparison,
            where_select: WhereSelect,
            cast: Cast,
            reduce: Reduce,
            arg_reduce: ArgReduce,
            statistics: Statistics,
            matmul: Matmul,
            indexing: Indexing,
            concat: Concat,
            views: Views,
            softmax: Softmax,
            conv: Conv,
            pool: Pool,
            attention: Attention,
            fused: Fused,
            random: Random,
            constructors: Constructors,
            display: Display,
            gradients: Gradients,
            metamorphic: Metamorphic,
            errors: Errors,
        }
    };
}

/// The test functions of [`conformance_suite!`](crate::conformance_suite) (not public API).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($backend:ty, $make:expr, $capabilities:expr; $($test:ident: $family:ident,)*) => {
        $(
            #[test]
            fn $test() {
                let dev: $backend = ($make)();
                let capabilities: $crate::suite::Capabilities = ($capabilities)(&dev);
                let config = $crate::runner::RunConfig::from_env().with_regressions(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/proptest-regressions"
                ));
                $crate::suite::assert_family(
                    &dev,
                    $crate::suite::Family::$family,
                    &capabilities,
                    &config,
                );
            }
        )*
    };
}
