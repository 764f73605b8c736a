// The conformance suite of the `tests` crate (`tessera_conformance::suite`: every op family, capability
// matrix, shrunk counterexamples), one `#[test]` per family, for a device given as an
// expression of type `Option<B>`: None makes the test print why and return (skip), which the
// `tessera_conformance::conformance_suite!` macro cannot do.
//
// Included (with `include!`) by the GPU conformance test (`tests/gpu_conformance.rs`, real
// CUDA) and by the crate's OpenCL-driven unit tests (`src/emulation`), so both run exactly the
// same checks. `$regressions` is the folder where failing seeds are kept and replayed (None:
// nothing persisted, e.g. on a GPU machine that only has the bundle).

macro_rules! conformance_suite_or_skip {
    ($device:expr, $regressions:expr) => {
        macro_rules! family {
            ($name:ident, $family:ident) => {
                #[test]
                fn $name() {
                    let Some(dev) = $device else { return };
                    let capabilities = tessera_conformance::suite::Capabilities::declared_by(&dev);
                    let mut config = tessera_conformance::runner::RunConfig::from_env();
                    let regressions: Option<&str> = $regressions;
                    if let Some(dir) = regressions {
                        config = config.with_regressions(dir);
                    }
                    tessera_conformance::suite::assert_family(
                        &dev,
                        tessera_conformance::suite::Family::$family,
                        &capabilities,
                        &config,
                    );
                }
            };
        }

        family!(device, Device);
        family!(memory, Memory);
        family!(unary, Unary);
        family!(binary, Binary);
        family!(comparison, Comparison);
        family!(where_select, WhereSelect);
        family!(cast, Cast);
        family!(reduce, Reduce);
        family!(arg_reduce, ArgReduce);
        family!(statistics, Statistics);
        family!(matmul, Matmul);
        family!(indexing, Indexing);
        family!(concat, Concat);
        family!(views, Views);
        family!(softmax, Softmax);
        family!(conv, Conv);
        family!(pool, Pool);
        family!(attention, Attention);
        family!(fused, Fused);
        family!(random, Random);
        family!(constructors, Constructors);
        family!(display, Display);
        family!(gradients, Gradients);
        family!(metamorphic, Metamorphic);
        // The errors family runs on a device of its own (gpu_index_error.rs on a GPU, a private
        // emulated device in the emulation): its bad indices set the device-wide error flag,
        // which the other tests sharing this device read in parallel.

        #[test]
        fn every_family_has_a_test() {
            assert_eq!(tessera_conformance::suite::Family::ALL.len(), 25);
        }
    };
}
