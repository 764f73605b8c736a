//! The whole conformance suite on the CPU backend, through the same macro a backend author
//! uses.

tests::conformance_suite!(backend_cpu::Cpu, backend_cpu::Cpu::new);
