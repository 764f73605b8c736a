//! The whole conformance suite on the CPU backend, through the same macro a backend author
//! uses.

tessera_conformance::conformance_suite!(tessera_cpu::Cpu, tessera_cpu::Cpu::new);
