//! Capability declaration: which dtypes and ops a backend claims to support. The suite checks
//! every declared (op, dtype) pair and reports the rest as unsupported.

use super::op::{Family, Op};
use tessera_core::{Backend, DType};

/// What a backend declares it supports.
///
/// Start from [`Capabilities::declared_by`] (every op, the dtypes `supports_dtype` accepts) and
/// remove what the backend does not do yet:
///
/// ```
/// use tessera_conformance::suite::{Capabilities, Family, Op};
/// use tessera_core::DType;
/// let caps = Capabilities::all()
///     .without_dtype(DType::F64)
///     .without_family(Family::Conv)
///     .without_op(Op::Matmul);
/// assert!(!caps.declares(Op::Matmul, DType::F32));
/// assert!(caps.declares(Op::Softmax, DType::F32));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Capabilities {
    dtypes: Vec<DType>,
    excluded_families: Vec<Family>,
    excluded_ops: Vec<Op>,
    excluded_pairs: Vec<(Op, DType)>,
}

impl Capabilities {
    /// Every op on every dtype.
    pub fn all() -> Self {
        Capabilities {
            dtypes: DType::ALL.to_vec(),
            excluded_families: vec![],
            excluded_ops: vec![],
            excluded_pairs: vec![],
        }
    }

    /// Every op, on the dtypes for which `dev.supports_dtype` is true: the default of the
    /// generated suite.
    pub fn declared_by<B: Backend>(dev: &B) -> Self {
        Capabilities {
            dtypes: DType::ALL
                .into_iter()
                .filter(|&d| dev.supports_dtype(d))
                .collect(),
            ..Capabilities::all()
        }
    }

    /// Without `dtype` at all.
    pub fn without_dtype(mut self, dtype: DType) -> Self {
        self.dtypes.retain(|&d| d != dtype);
        self
    }

    /// Without any op of `family`.
    pub fn without_family(mut self, family: Family) -> Self {
        self.excluded_families.push(family);
        self
    }

    /// Without `op` on any dtype.
    pub fn without_op(mut self, op: Op) -> Self {
        self.excluded_ops.push(op);
        self
    }

    /// Without `op` on `dtype`.
    pub fn without_op_on(mut self, op: Op, dtype: DType) -> Self {
        self.excluded_pairs.push((op, dtype));
        self
    }

    /// The declared dtypes.
    pub fn dtypes(&self) -> &[DType] {
        &self.dtypes
    }

    /// Whether the backend claims `op` on `dtype`: the op is defined for it, neither it nor its
    /// family is excluded, and every dtype its check needs is declared.
    pub fn declares(&self, op: Op, dtype: DType) -> bool {
        op.defined_for().contains(&dtype)
            && self.dtypes.contains(&dtype)
            && op.also_needs(dtype).iter().all(|d| self.dtypes.contains(d))
            && !self.excluded_families.contains(&op.family())
            && !self.excluded_ops.contains(&op)
            && !self.excluded_pairs.contains(&(op, dtype))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::{CmpOp, UnaryOp};

    #[test]
    fn exclusions_and_needed_dtypes() {
        let caps = Capabilities::all().without_dtype(DType::Bool);
        // A comparison produces bools, so it is not declared without them.
        assert!(!caps.declares(Op::Compare(CmpOp::Lt), DType::F32));
        assert!(caps.declares(Op::Unary(UnaryOp::Exp), DType::F32));
        // Not defined, whatever the declaration.
        assert!(!Capabilities::all().declares(Op::Unary(UnaryOp::Exp), DType::I64));
        let caps = Capabilities::all().without_op_on(Op::Matmul, DType::F64);
        assert!(caps.declares(Op::Matmul, DType::F32) && !caps.declares(Op::Matmul, DType::F64));
    }
}
