//! The coverage matrix: op x dtype, each cell pass, FAIL, unsupported or undefined, plus the
//! counterexample of every failure.

use super::op::Op;
use crate::runner::{Counterexample, Printed};
use std::fmt;
use tessera_core::DType;

/// The result of one (op, dtype) cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Declared and checked: correct on every case.
    Pass,
    /// Declared and checked: wrong on some case (see the counterexample).
    Fail,
    /// Defined for the dtype but not declared by the backend: not checked.
    Unsupported,
    /// The op is not defined for the dtype (e.g. `exp` on i64).
    Undefined,
}

impl Outcome {
    fn cell(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "FAIL",
            Outcome::Unsupported => "unsupported",
            Outcome::Undefined => "-",
        }
    }
}

/// One row: an op and its outcome per dtype (in the order of [`DType::ALL`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CoverageRow {
    /// The op.
    pub op: Op,
    /// Outcomes for f32, f64, i64, bool.
    pub outcomes: [Outcome; DType::ALL.len()],
}

/// The matrix of one suite run (a family or everything) on one backend.
#[derive(Clone, Debug, Default)]
pub struct Coverage {
    /// Name of the backend checked.
    pub backend: String,
    /// One row per op, in the order checked.
    pub rows: Vec<CoverageRow>,
    /// The counterexample of every failed cell.
    pub failures: Vec<Counterexample<Printed>>,
}

fn column(dtype: DType) -> usize {
    DType::ALL
        .iter()
        .position(|&d| d == dtype)
        .expect("every dtype is in DType::ALL")
}

impl Coverage {
    /// An empty matrix for `backend`.
    pub fn new(backend: &str) -> Self {
        Coverage {
            backend: backend.to_string(),
            ..Coverage::default()
        }
    }

    /// Records the outcome of `(op, dtype)`.
    pub fn record(&mut self, op: Op, dtype: DType, outcome: Outcome) {
        let index = match self.rows.iter().position(|r| r.op == op) {
            Some(i) => i,
            None => {
                self.rows.push(CoverageRow {
                    op,
                    outcomes: [Outcome::Undefined; DType::ALL.len()],
                });
                self.rows.len() - 1
            }
        };
        self.rows[index].outcomes[column(dtype)] = outcome;
    }

    /// The outcome of `(op, dtype)` (`Undefined` when the op was not run at all).
    pub fn outcome(&self, op: Op, dtype: DType) -> Outcome {
        self.rows
            .iter()
            .find(|r| r.op == op)
            .map_or(Outcome::Undefined, |r| r.outcomes[column(dtype)])
    }

    /// Every cell with this outcome.
    pub fn cells(&self, outcome: Outcome) -> Vec<(Op, DType)> {
        self.rows
            .iter()
            .flat_map(|r| {
                DType::ALL
                    .into_iter()
                    .filter(move |&d| r.outcomes[column(d)] == outcome)
                    .map(move |d| (r.op, d))
            })
            .collect()
    }

    /// True when no declared cell failed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.cells(Outcome::Fail).is_empty()
    }

    /// Appends the rows and failures of `other`.
    pub fn extend(&mut self, other: Coverage) {
        self.rows.extend(other.rows);
        self.failures.extend(other.failures);
    }
}

impl fmt::Display for Coverage {
    /// The matrix as a table, then every counterexample.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = |r: &CoverageRow| r.op.to_string();
        let width = self
            .rows
            .iter()
            .map(|r| label(r).len())
            .max()
            .unwrap_or(2)
            .max(2);
        writeln!(f, "conformance of backend `{}`:", self.backend)?;
        write!(f, "{:width$}", "op")?;
        for d in DType::ALL {
            write!(f, "  {:11}", d.name())?;
        }
        writeln!(f, "  Backend method")?;
        for row in &self.rows {
            write!(f, "{:width$}", label(row))?;
            for outcome in row.outcomes {
                write!(f, "  {:11}", outcome.cell())?;
            }
            writeln!(f, "  {}", row.op.method().unwrap_or("(composition)"))?;
        }
        let count = |o| self.cells(o).len();
        write!(
            f,
            "{} pass, {} FAIL, {} unsupported",
            count(Outcome::Pass),
            count(Outcome::Fail),
            count(Outcome::Unsupported)
        )?;
        for failure in &self.failures {
            write!(f, "\n\n{failure}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::UnaryOp;

    #[test]
    fn records_and_prints_cells() {
        let mut c = Coverage::new("demo");
        let exp = Op::Unary(UnaryOp::Exp);
        c.record(exp, DType::F32, Outcome::Pass);
        c.record(exp, DType::F64, Outcome::Fail);
        assert_eq!(c.outcome(exp, DType::F64), Outcome::Fail);
        assert_eq!(c.outcome(exp, DType::I64), Outcome::Undefined);
        assert!(!c.passed());
        let text = c.to_string();
        assert!(
            text.contains("unary exp  pass         FAIL         -"),
            "{text}"
        );
        assert!(text.contains("1 pass, 1 FAIL, 0 unsupported"), "{text}");
    }
}
