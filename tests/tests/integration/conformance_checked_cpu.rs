//! The whole suite through `Checked<Cpu, Cpu>`: every primitive and composite runs on both
//! sides and is compared, so any false alarm of the checker (a tolerance too tight for a
//! legitimate difference, a wrong output shape, a layout it mishandles) fails here.

use tessera_checked::Checked;
use tessera_cpu::Cpu;

tessera_conformance::conformance_suite!(Checked<Cpu, Cpu>, || Checked::new(Cpu::new(), Cpu::new()));
