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
        let (ld, rd) = (lhs.dims(), r.dims());
        let (m, k) = (ld[ld.len() - 2], ld[ld.len() - 1]);
        let (k2, n) = (rd[rd.len() - 2], rd[rd.len() - 1]);
        if k != k2 {
            return Err(Error::MatmulShape {
                lhs: self.shape().clone(),
                rhs: rhs.shape().clone(),
            });
        }
        let lb = Shape::new(&ld[..ld.len() - 2]);
        let rb = Shape::new(&rd[..rd.len() - 2]);
        let batch = lb.broadcast_with(OP, &rb).map_err(|_| Error::MatmulShape {
            lhs: self.shape().clone(),
            rhs: rhs.shape().clone(),
        })?;
        let with = |b: &Shape, x: usize, y: usize| {
            let mut v = b.dims().to_vec();
            v.extend([x, y]);
            Shape::new(v)
        };
        check_output(OP, &with(&batch, m, n), self.dtype())?;
        let lhs = lhs.broadcast_to(with(&batch, m, k))?;
        let r = r.broadcast_to(with(&batch, k, n))?;
        let xs = MatmulOperands::new(lhs.operand(OP)?, r.operand(OP)?)?;
        let storage = dispatch::matmul(&self.backend, xs)?;
        let out = Self::from_output(&self.backend, storage, with(&batch, m, n));
        match (self.rank(), rhs.rank()) {
            (1, 1) => out.reshape(Shape::scalar()),
            (1, _) => out.squeeze(-2),
            (_, 1) => out.squeeze(-1),
            _ => Ok(out),
        }
    }
}
