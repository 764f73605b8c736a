//! Casts between every pair of dtypes, on the CPU backend.

use tessera_conformance::checks::cast;
use tessera_core::DType;
use tessera_cpu::Cpu;

macro_rules! cast_tests {
    ($($name:ident: $from:ident;)*) => {
        $(
            #[test]
            fn $name() {
                let dev = Cpu::new();
                for to in DType::ALL {
                    cast::run(&dev, DType::$from, to);
                }
            }
        )*
    };
}

cast_tests! {
    from_f32: F32;
    from_f64: F64;
    from_i64: I64;
    from_bool: Bool;
}
