//! How [`Checked`] compares: reading both sides' outputs, the tolerance of each op
//! ([`OpSpec`]), error magnitudes computed on the reference, and the operands as each side sees
//! them.

use crate::divergence::Comparison;
use crate::storage::CheckedStorage;
use crate::tolerance::Tolerance;
use crate::Checked;
use std::sync::Arc;
use tessera_core::dispatch;
use tessera_core::operand::Operand;
use tessera_core::{Backend, BackendStorage, DType, HostData, Layout, Result, Shape, UnaryOp};

/// An operand as the backend under test and the reference see it.
type Sides<'a, B, R> = (
    Operand<'a, <B as Backend>::Storage>,
    Operand<'a, <R as Backend>::Storage>,
);

impl<B: Backend, R: Backend> Checked<B, R> {
    /// Reads every element of a contiguous storage of `B`.
    pub(crate) fn host_b(&self, s: &B::Storage) -> Result<HostData> {
        let whole = Layout::contiguous([s.len()]);
        self.under_test
            .download(Operand::new("download", s, &whole)?)
    }

    /// Reads every element of a contiguous storage of `R`.
    pub(crate) fn host_r(&self, s: &R::Storage) -> Result<HostData> {
        let whole = Layout::contiguous([s.len()]);
        self.reference
            .download(Operand::new("download", s, &whole)?)
    }

    /// Compares the two outputs of `op`; on agreement pairs the output of the backend under
    /// test with a reference mirror holding the same values.
    pub(crate) fn settle(
        &self,
        spec: OpSpec,
        b_out: B::Storage,
        r_out: R::Storage,
        magnitude: Option<Vec<f64>>,
    ) -> Result<CheckedStorage<B, R>> {
        let got = self.host_b(&b_out)?;
        let expected = self.host_r(&r_out)?;
        self.compare(&spec, &got, &expected, magnitude.as_deref())?;
        Ok(CheckedStorage {
            under_test: Arc::new(b_out),
            reference: Arc::new(self.reference.upload(got)?),
        })
    }

    /// Compares host copies of the two outputs of `op`.
    pub(crate) fn compare(
        &self,
        spec: &OpSpec,
        got: &HostData,
        expected: &HostData,
        magnitude: Option<&[f64]>,
    ) -> Result<()> {
        Comparison {
            op: spec.op,
            backends: (self.under_test.name(), self.reference.name()),
            inputs: spec.inputs.clone(),
            output: &spec.output,
            tolerance: spec.tolerance.scaled(self.tolerance_factor),
            magnitude,
        }
        .check(got, expected)
    }

    /// `op(|x|)` on the reference, flattened: the error magnitude of a linear accumulating op.
    /// `op` receives the absolute values of `inputs`, contiguous.
    pub(crate) fn magnitude_of<const N: usize>(
        &self,
        dtype: DType,
        inputs: [Operand<'_, R::Storage>; N],
        op: impl for<'x> FnOnce(&R, [Operand<'x, R::Storage>; N]) -> Result<R::Storage>,
    ) -> Result<Option<Vec<f64>>> {
        if !dtype.is_float() {
            return Ok(None);
        }
        let mut abs = Vec::with_capacity(N);
        for x in inputs {
            let storage = dispatch::unary(&self.reference, UnaryOp::Abs, x)?;
            abs.push((storage, Layout::contiguous(x.dims().to_vec())));
        }
        let mut operands = Vec::with_capacity(N);
        for (storage, layout) in &abs {
            operands.push(Operand::new("magnitude", storage, layout)?);
        }
        let operands: [Operand<'_, R::Storage>; N] = operands
            .try_into()
            .unwrap_or_else(|_| unreachable!("one operand per input"));
        let m = op(&self.reference, operands)?;
        Ok(Some(self.host_r(&m)?.to_f64_vec()))
    }

    /// The operand as each backend sees it: the same layout over each side's buffer.
    pub(crate) fn sides<'a>(
        op: &'static str,
        x: Operand<'a, CheckedStorage<B, R>>,
    ) -> Result<Sides<'a, B, R>> {
        let storage = x.storage();
        Ok((
            x.with_storage(op, &*storage.under_test)?,
            x.with_storage(op, &*storage.reference)?,
        ))
    }

    /// [`Checked::sides`] of several operands.
    #[allow(clippy::type_complexity)]
    pub(crate) fn all_sides<'a, const N: usize>(
        op: &'static str,
        xs: [Operand<'a, CheckedStorage<B, R>>; N],
    ) -> Result<([Operand<'a, B::Storage>; N], [Operand<'a, R::Storage>; N])> {
        let mut bs = Vec::with_capacity(N);
        let mut rs = Vec::with_capacity(N);
        for x in xs {
            let (b, r) = Self::sides(op, x)?;
            bs.push(b);
            rs.push(r);
        }
        let bs = bs
            .try_into()
            .unwrap_or_else(|_| unreachable!("one operand per input"));
        let rs = rs
            .try_into()
            .unwrap_or_else(|_| unreachable!("one operand per input"));
        Ok((bs, rs))
    }
}

/// What to compare for one op.
pub(crate) struct OpSpec {
    pub op: &'static str,
    pub inputs: Vec<Shape>,
    pub output: Vec<usize>,
    pub tolerance: Tolerance,
}

impl OpSpec {
    pub(crate) fn new(
        op: &'static str,
        inputs: &[&Layout],
        output: &[usize],
        tolerance: Tolerance,
    ) -> Self {
        OpSpec {
            op,
            inputs: inputs.iter().map(|l| l.shape().clone()).collect(),
            output: output.to_vec(),
            tolerance,
        }
    }
}

/// `dims` with every axis of `axes` (those in range) set to 1: a reduction's output shape.
pub(crate) fn with_axes_kept(dims: &[usize], axes: &[usize]) -> Vec<usize> {
    let mut out = dims.to_vec();
    for &a in axes {
        if a < out.len() {
            out[a] = 1;
        }
    }
    out
}
