//! The whole suite through `Checked<Cpu, Cpu>`: every primitive and composite runs on both
//! sides and is compared, so any false alarm of the checker (a tolerance too tight for a
//! legitimate difference, a wrong output shape, a layout it mishandles) fails here.

use backend_checked::Checked;
use backend_cpu::Cpu;

tests::conformance_suite!(Checked<Cpu, Cpu>, || Checked::new(Cpu::new(), Cpu::new()));
