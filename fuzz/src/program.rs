//! Programs: a seed, a backend and a list of steps, each an operation of the table applied to
//! drawn arguments and register references. A program is generated from its seed alone (never
//! from results), so the parent process can print exactly what a crashed child was running.

use crate::args::{Arg, ArgKind, Kind};
use crate::rng::Rng;
use std::fmt;

/// The backend-independent part of an operation of the table: what it is called, how often it
/// is drawn, what arguments it takes and what it produces.
#[derive(Clone, Copy, Debug)]
pub struct Sig {
    /// The API call it exercises, as printed: `Tensor::narrow`, `Linear::new`, ...
    pub name: &'static str,
    /// How often it is drawn, relative to the others.
    pub weight: u32,
    /// Its arguments, in order.
    pub args: &'static [ArgKind],
    /// The registers it fills on success (in order); on failure they hold nothing.
    pub outputs: &'static [Kind],
    /// How often it is drawn as one of the first steps of a program, which create the values
    /// the others use (0: never; only operations without register arguments).
    pub starter: u32,
}

/// The backends a program can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// `tessera_cpu::Cpu`.
    Cpu,
    /// `tessera_backend_example::ExampleBackend`, the template vendors copy.
    Example,
}

/// One step: operation `op` (an index into the table) with its arguments; its outputs go to
/// the registers listed.
#[derive(Clone, Debug)]
pub struct Step {
    /// Index of the operation in the table.
    pub op: usize,
    /// The drawn arguments.
    pub args: Vec<Arg>,
    /// The registers the outputs go to.
    pub outputs: Vec<(Kind, usize)>,
}

/// A complete program.
#[derive(Clone, Debug)]
pub struct Program {
    /// The seed it was generated from.
    pub seed: u64,
    /// The backend it runs on.
    pub backend: BackendChoice,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl Program {
    /// The program of `seed` over the operations `sigs`.
    pub fn generate(seed: u64, sigs: &[Sig]) -> Program {
        let mut rng = Rng::new(seed);
        let backend = if rng.chance(75) {
            BackendChoice::Cpu
        } else {
            BackendChoice::Example
        };
        let len = rng.range(4, 32);
        let mut counts = [0usize; 4];
        let slot = |k: Kind| match k {
            Kind::Tensor => 0,
            Kind::Var => 1,
            Kind::Layer => 2,
            Kind::Optim => 3,
        };
        let starters: Vec<u32> = sigs.iter().map(|s| s.starter).collect();
        let first_steps = rng.range(2, 4);
        let all: Vec<u32> = sigs.iter().map(|s| s.weight).collect();
        let mut steps = Vec::with_capacity(len);
        let mut attempts = 0;
        while steps.len() < len && attempts < 20 * len {
            attempts += 1;
            // The first steps create values for the others to use.
            let op = if steps.len() < first_steps {
                rng.weighted(&starters)
            } else {
                rng.weighted(&all)
            };
            let sig = &sigs[op];
            let args: Option<Vec<Arg>> = sig
                .args
                .iter()
                .map(|a| a.draw(&mut rng, |k| counts[slot(k)]))
                .collect();
            let Some(args) = args else { continue };
            let outputs = sig
                .outputs
                .iter()
                .map(|&k| {
                    counts[slot(k)] += 1;
                    (k, counts[slot(k)] - 1)
                })
                .collect();
            steps.push(Step { op, args, outputs });
        }
        Program {
            seed,
            backend,
            steps,
        }
    }

    /// The program as readable pseudo-Rust, one step per line, numbered.
    pub fn display<'a>(&'a self, sigs: &'a [Sig]) -> impl fmt::Display + 'a {
        ProgramText {
            program: self,
            sigs,
        }
    }
}

/// See [`Program::display`].
struct ProgramText<'a> {
    program: &'a Program,
    sigs: &'a [Sig],
}

impl fmt::Display for ProgramText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "// program {} on {:?} (cargo run -p fuzz -- replay --seed {}); a failed step's \
             outputs hold its first argument of their kind",
            self.program.seed, self.program.backend, self.program.seed
        )?;
        for (i, step) in self.program.steps.iter().enumerate() {
            writeln!(f, "/* {i:2} */ {}", StepText(step, self.sigs))?;
        }
        Ok(())
    }
}

/// One step as `t3 = Tensor::narrow(&t1, -1, 2, usize::MAX);`.
pub struct StepText<'a>(pub &'a Step, pub &'a [Sig]);

impl fmt::Display for StepText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let StepText(step, sigs) = self;
        let outs: Vec<String> = step
            .outputs
            .iter()
            .map(|(k, i)| format!("{}{i}", k.prefix()))
            .collect();
        match outs.len() {
            0 => {}
            1 => write!(f, "{} = ", outs[0])?,
            _ => write!(f, "({}) = ", outs.join(", "))?,
        }
        let args: Vec<String> = step.args.iter().map(|a| a.to_string()).collect();
        write!(f, "{}({});", sigs[step.op].name, args.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGS: [Sig; 2] = [
        Sig {
            name: "make",
            weight: 1,
            args: &[ArgKind::Dims],
            outputs: &[Kind::Tensor],
            starter: 1,
        },
        Sig {
            name: "use",
            weight: 3,
            args: &[ArgKind::Reg(Kind::Tensor), ArgKind::Axis],
            outputs: &[Kind::Tensor],
            starter: 0,
        },
    ];

    #[test]
    fn programs_are_a_function_of_the_seed() {
        let a = Program::generate(11, &SIGS);
        let b = Program::generate(11, &SIGS);
        assert_eq!(a.display(&SIGS).to_string(), b.display(&SIGS).to_string());
        assert!(a.steps.len() >= 4);
    }

    #[test]
    fn references_point_at_earlier_outputs() {
        for seed in 0..50 {
            let p = Program::generate(seed, &SIGS);
            let mut made = 0;
            for step in &p.steps {
                for arg in &step.args {
                    if let Arg::Reg(Kind::Tensor, i) = arg {
                        assert!(*i < made, "seed {seed}");
                    }
                }
                made += step.outputs.len();
            }
        }
    }
}
