//! Matrix products.

use super::{check_output, Tensor};
use crate::dispatch;
use crate::operand::MatmulOperands;
use crate::{Backend, Error, Result, Shape};

impl<B: Backend> Tensor<B> {
    /// Matrix product with NumPy's `matmul` semantics: rank-1 operands are promoted (and the
    /// promoted axis removed afterwards), batch dimensions broadcast. f32/f64 only.
    pub fn matmul(&self, rhs: &Self) -> Result<Self> {
        const OP: &str = "matmul";
        self.check_same_device(OP, rhs)?;
        self.check_same_dtype(OP, rhs)?;
        self.check_float(OP)?;
        if self.rank() == 0 || rhs.rank() == 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "operands must have rank >= 1, got {} and {}",
                    self.shape(),
                    rhs.shape()
                ),
            });
        }
        let lhs = if self.rank() == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let r = if rhs.rank() == 1 {
            rhs.unsqueeze(1)?
        } else {
            rhs.clone()
        };
        let (lhs, r, out) = broadcast_product(OP, &lhs, &r).map_err(|e| match e {
            Error::MatmulShape { .. } => Error::MatmulShape {
                lhs: self.shape().clone(),
                rhs: rhs.shape().clone(),
            },
            other => other,
        })?;
        let xs = MatmulOperands::new(lhs.operand(OP)?, r.operand(OP)?)?;
        let storage = dispatch::matmul(&self.backend, xs)?;
        let out = Self::from_output(&self.backend, storage, out);
        match (self.rank(), rhs.rank()) {
            (1, 1) => out.reshape(Shape::scalar()),
            (1, _) => out.squeeze(-2),
            (_, 1) => out.squeeze(-1),
            _ => Ok(out),
        }
    }

    /// `self·rhs + bias` for operands of rank 2 or more (batch dimensions broadcast as in
    /// [`Tensor::matmul`]) and a bias vector of `rhs`'s column count, added to every row: a
    /// linear layer's forward pass, which a backend may compute in one pass
    /// ([`Backend::matmul_bias`]). f32/f64 and the 16-bit floats.
    ///
    /// ```
    /// # fn demo<B: tessera_core::Backend>(dev: &B) -> tessera_core::Result<()> {
    /// use tessera_core::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], dev)?;
    /// let w = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], [2, 2], dev)?;
    /// let b = Tensor::from_vec(vec![10.0f32, 20.0], [2], dev)?;
    /// assert_eq!(x.matmul_bias(&w, &b)?.to_vec::<f32>()?, [11.0, 22.0, 13.0, 24.0]);
    /// # Ok(()) }
    /// ```
    pub fn matmul_bias(&self, rhs: &Self, bias: &Self) -> Result<Self> {
        const OP: &str = "matmul_bias";
        self.check_same_device(OP, rhs)?;
        self.check_same_dtype(OP, rhs)?;
        self.check_float(OP)?;
        if self.rank() < 2 || rhs.rank() < 2 {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "operands must have rank >= 2, got {} and {}",
                    self.shape(),
                    rhs.shape()
                ),
            });
        }
        let (lhs, rhs, _) = broadcast_product(OP, self, rhs)?;
        dispatch::matmul_bias(&lhs, &rhs, bias)
    }
}

/// `lhs` and `rhs` (rank 2 or more) broadcast to common batch dimensions, and the product's
/// shape `[..batch, m, n]`, checked against the size limits; [`Error::MatmulShape`] when the
/// inner sizes or batch dimensions disagree.
fn broadcast_product<B: Backend>(
    op: &'static str,
    lhs: &Tensor<B>,
    rhs: &Tensor<B>,
) -> Result<(Tensor<B>, Tensor<B>, Shape)> {
    let (ld, rd) = (lhs.dims(), rhs.dims());
    let (m, k) = (ld[ld.len() - 2], ld[ld.len() - 1]);
    let (k2, n) = (rd[rd.len() - 2], rd[rd.len() - 1]);
    let mismatch = || Error::MatmulShape {
        lhs: lhs.shape().clone(),
        rhs: rhs.shape().clone(),
    };
    if k != k2 {
        return Err(mismatch());
    }
    let lb = Shape::new(&ld[..ld.len() - 2]);
    let rb = Shape::new(&rd[..rd.len() - 2]);
    let batch = lb.broadcast_with(op, &rb).map_err(|_| mismatch())?;
    let with = |x: usize, y: usize| {
        let mut v = batch.dims().to_vec();
        v.extend([x, y]);
        Shape::new(v)
    };
    check_output(op, &with(m, n), lhs.dtype())?;
    Ok((
        lhs.broadcast_to(with(m, k))?,
        rhs.broadcast_to(with(k, n))?,
        with(m, n),
    ))
}
