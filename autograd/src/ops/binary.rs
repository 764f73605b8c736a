//! Element-wise ops of two operands (NumPy broadcasting), their scalar forms, and `where`.
//!
//! The gradient reaching a broadcast operand is summed back to its shape over the broadcast axes.
//! `maximum`/`minimum` split the gradient evenly between the operands where they tie (as PyTorch
//! does). For `pow`, the gradient with respect to the base is taken as 0 where the exponent is 0,
//! and the gradient with respect to the exponent as 0 where the base is 0 (PyTorch's choices).

use super::{grad_if, sum_to_dims};
use crate::Var;
use tessera_core::{Backend, Result, Tensor};

/// The share of the gradient of `maximum(a, b)` (or `minimum` with `a_wins = a.lt(b)`) that goes
/// to `a`: all of it where `a` wins, half where they tie, none elsewhere.
fn winner_share<B: Backend>(
    g: &Tensor<B>,
    a_wins: &Tensor<B>,
    tie: &Tensor<B>,
) -> Result<Tensor<B>> {
    let zero = g.scalar_like(0.0)?;
    let half = g.mul_scalar(0.5)?;
    a_wins.where_select(g, &tie.where_select(&half, &zero)?)
}

impl<B: Backend> Var<B> {
    /// Records a two-operand op from the gradients with respect to each operand in the broadcast
    /// shape (`rules` gets the upstream gradient and which operands need one); the results are
    /// summed back to each operand's shape.
    fn binary_op(
        &self,
        rhs: &Var<B>,
        value: Tensor<B>,
        rules: impl Fn(&Tensor<B>, [bool; 2]) -> Result<[Option<Tensor<B>>; 2]> + Send + Sync + 'static,
    ) -> Var<B> {
        let need = [self.requires_grad(), rhs.requires_grad()];
        let (lhs_dims, rhs_dims) = (self.dims().to_vec(), rhs.dims().to_vec());
        Var::from_op(value, vec![self.clone(), rhs.clone()], move |g| {
            let [ga, gb] = rules(g, need)?;
            Ok(vec![
                ga.map(|t| sum_to_dims(&t, &lhs_dims)).transpose()?,
                gb.map(|t| sum_to_dims(&t, &rhs_dims)).transpose()?,
            ])
        })
    }

    /// `self + rhs` with broadcasting.
    pub fn add(&self, rhs: &Var<B>) -> Result<Var<B>> {
        let value = self.value().add(&rhs.value())?;
        Ok(self.binary_op(rhs, value, |g, [na, nb]| {
            Ok([
                grad_if(na, || Ok(g.clone()))?,
                grad_if(nb, || Ok(g.clone()))?,
            ])
        }))
    }

    /// `self - rhs` with broadcasting.
    pub fn sub(&self, rhs: &Var<B>) -> Result<Var<B>> {
        let value = self.value().sub(&rhs.value())?;
        Ok(self.binary_op(rhs, value, |g, [na, nb]| {
            Ok([grad_if(na, || Ok(g.clone()))?, grad_if(nb, || g.neg())?])
        }))
    }

    /// `self * rhs` with broadcasting.
    pub fn mul(&self, rhs: &Var<B>) -> Result<Var<B>> {
        let (a, b) = (self.value(), rhs.value());
        let value = a.mul(&b)?;
        Ok(self.binary_op(rhs, value, move |g, [na, nb]| {
            Ok([grad_if(na, || g.mul(&b))?, grad_if(nb, || g.mul(&a))?])
        }))
    }

    /// `self / rhs` with broadcasting.
    pub fn div(&self, rhs: &Var<B>) -> Result<Var<B>> {
        let (a, b) = (self.value(), rhs.value());
        let value = a.div(&b)?;
        Ok(self.binary_op(rhs, value, move |g, [na, nb]| {
            Ok([
                grad_if(na, || g.div(&b))?,
                grad_if(nb, || g.mul(&a)?.div(&b.square()?)?.neg())?,
            ])
        }))
    }

    /// `self ^ rhs` with broadcasting.
    pub fn pow(&self, rhs: &Var<B>) -> Result<Var<B>> {
        let (a, b) = (self.value(), rhs.value());
        let value = a.pow(&b)?;
        let y = value.clone();
        Ok(self.binary_op(rhs, value, move |g, [na, nb]| {
            let zero = g.scalar_like(0.0)?;
            let d_base = grad_if(na, || {
                let slope = b.mul(&a.pow(&b.sub_scalar(1.0)?)?)?;
                b.eq_scalar(0.0)?.where_select(&zero, &g.mul(&slope)?)
            })?;
            let d_exponent = grad_if(nb, || {
                let slope = y.mul(&a.log()?)?;
                a.eq_scalar(0.0)?.where_select(&zero, &g.mul(&slope)?)
            })?;
            Ok([d_base, d_exponent])
        }))
    }

    /// Element-wise maximum with broadcasting; ties split the gradient evenly.
    pub fn maximum(&self, rhs: &Var<B>) -> Result<Var<B>> {
        let (a, b) = (self.value(), rhs.value());
        let value = a.maximum(&b)?;
        Ok(self.binary_op(rhs, value, move |g, [na, nb]| {
            let tie = a.eq(&b)?;
            Ok([
                grad_if(na, || winner_share(g, &a.gt(&b)?, &tie))?,
                grad_if(nb, || winner_share(g, &b.gt(&a)?, &tie))?,
            ])
        }))
    }

    /// Element-wise minimum with broadcasting; ties split the gradient evenly.
    pub fn minimum(&self, rhs: &Var<B>) -> Result<Var<B>> {
        let (a, b) = (self.value(), rhs.value());
        let value = a.minimum(&b)?;
        Ok(self.binary_op(rhs, value, move |g, [na, nb]| {
            let tie = a.eq(&b)?;
            Ok([
                grad_if(na, || winner_share(g, &a.lt(&b)?, &tie))?,
                grad_if(nb, || winner_share(g, &b.lt(&a)?, &tie))?,
            ])
        }))
    }

    /// `self + c`.
    pub fn add_scalar(&self, c: f64) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().add_scalar(c)?, |g| Ok(g.clone())))
    }

    /// `self - c`.
    pub fn sub_scalar(&self, c: f64) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().sub_scalar(c)?, |g| Ok(g.clone())))
    }

    /// `self * c`.
    pub fn mul_scalar(&self, c: f64) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().mul_scalar(c)?, move |g| g.mul_scalar(c)))
    }

    /// `self / c`.
    pub fn div_scalar(&self, c: f64) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().div_scalar(c)?, move |g| g.div_scalar(c)))
    }

    /// `self ^ c`; gradient `c x^(c - 1)` (0 everywhere when `c == 0`).
    pub fn powf(&self, c: f64) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.powf(c)?, move |g| {
            if c == 0.0 {
                return g.zeros_like();
            }
            g.mul(&x.powf(c - 1.0)?.mul_scalar(c)?)
        }))
    }

    /// `max(self, c)`; the gradient passes where `x > c`, half of it where `x == c`.
    pub fn maximum_scalar(&self, c: f64) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.maximum_scalar(c)?, move |g| {
            winner_share(g, &x.gt_scalar(c)?, &x.eq_scalar(c)?)
        }))
    }

    /// `min(self, c)`; the gradient passes where `x < c`, half of it where `x == c`.
    pub fn minimum_scalar(&self, c: f64) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.minimum_scalar(c)?, move |g| {
            winner_share(g, &x.lt_scalar(c)?, &x.eq_scalar(c)?)
        }))
    }

    /// `cond ? on_true : on_false` element by element, with `cond` a plain bool tensor; all three
    /// broadcast together. Each branch receives the gradient where it was selected.
    pub fn where_select(cond: &Tensor<B>, on_true: &Var<B>, on_false: &Var<B>) -> Result<Var<B>> {
        let value = cond.where_select(&on_true.value(), &on_false.value())?;
        let cond = cond.clone();
        Ok(on_true.binary_op(on_false, value, move |g, [nt, nf]| {
            let zero = g.scalar_like(0.0)?;
            Ok([
                grad_if(nt, || cond.where_select(g, &zero))?,
                grad_if(nf, || cond.where_select(&zero, g))?,
            ])
        }))
    }
}
