//! Element-wise functions of one operand and their derivatives.
//!
//! At kinks the derivative chosen is PyTorch's: `abs'(0) = 0`, `relu'(0) = 0`,
//! `leaky_relu'(0) = slope`, and `clamp` passes the gradient where `min <= x <= max`. The
//! piecewise-constant `sign`, `floor` and `ceil` have a zero gradient everywhere.

use crate::Var;
use tessera_core::{dispatch, Backend, Result};

impl<B: Backend> Var<B> {
    /// `-x`.
    pub fn neg(&self) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().neg()?, |g| g.neg()))
    }

    /// `|x|`; gradient `sign(x)` (0 at 0).
    pub fn abs(&self) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.abs()?, move |g| g.mul(&x.sign()?)))
    }

    /// Sign of each element; its gradient is zero.
    pub fn sign(&self) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().sign()?, |g| g.zeros_like()))
    }

    /// `x * x`; gradient `2x`.
    pub fn square(&self) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.square()?, move |g| g.mul(&x)?.mul_scalar(2.0)))
    }

    /// `1 / x`; gradient `-1 / x^2`.
    pub fn recip(&self) -> Result<Var<B>> {
        let y = self.value().recip()?;
        let saved = y.clone();
        Ok(self.unary_op(y, move |g| g.mul(&saved.square()?)?.neg()))
    }

    /// `sqrt(x)`; gradient `1 / (2 sqrt(x))`.
    pub fn sqrt(&self) -> Result<Var<B>> {
        let y = self.value().sqrt()?;
        let saved = y.clone();
        Ok(self.unary_op(y, move |g| g.div(&saved)?.mul_scalar(0.5)))
    }

    /// `1 / sqrt(x)`; gradient `-x^(-3/2) / 2`.
    pub fn rsqrt(&self) -> Result<Var<B>> {
        let y = self.value().rsqrt()?;
        let saved = y.clone();
        Ok(self.unary_op(y, move |g| {
            g.mul(&saved.square()?.mul(&saved)?)?.mul_scalar(-0.5)
        }))
    }

    /// `e^x`; gradient `e^x`.
    pub fn exp(&self) -> Result<Var<B>> {
        let y = self.value().exp()?;
        let saved = y.clone();
        Ok(self.unary_op(y, move |g| g.mul(&saved)))
    }

    /// Natural logarithm; gradient `1 / x`.
    pub fn log(&self) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.log()?, move |g| g.div(&x)))
    }

    /// Sine; gradient `cos(x)`.
    pub fn sin(&self) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.sin()?, move |g| g.mul(&x.cos()?)))
    }

    /// Cosine; gradient `-sin(x)`.
    pub fn cos(&self) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.cos()?, move |g| g.mul(&x.sin()?)?.neg()))
    }

    /// Hyperbolic tangent; gradient `1 - tanh(x)^2`.
    pub fn tanh(&self) -> Result<Var<B>> {
        let y = self.value().tanh()?;
        let saved = y.clone();
        Ok(self.unary_op(y, move |g| {
            let slope = saved.square()?.neg()?.add_scalar(1.0)?;
            g.mul(&slope)
        }))
    }

    /// Logistic sigmoid; gradient `s (1 - s)`.
    pub fn sigmoid(&self) -> Result<Var<B>> {
        let y = self.value().sigmoid()?;
        let saved = y.clone();
        Ok(self.unary_op(y, move |g| {
            let slope = saved.mul(&saved.neg()?.add_scalar(1.0)?)?;
            g.mul(&slope)
        }))
    }

    /// `max(x, 0)`; gradient 1 where `x > 0`, else 0.
    pub fn relu(&self) -> Result<Var<B>> {
        let x = self.value();
        // The backend's fused gradient (one pass on the CPU; a compare and a select by default).
        Ok(self.unary_op(x.relu()?, move |g| dispatch::relu_backward(&x, g)))
    }

    /// Leaky ReLU: `x` where positive, `slope * x` elsewhere; gradient 1 or `slope`.
    pub fn leaky_relu(&self, slope: f64) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.leaky_relu(slope)?, move |g| {
            x.gt_scalar(0.0)?.where_select(g, &g.mul_scalar(slope)?)
        }))
    }

    /// Exact GELU `x Φ(x)`; gradient `Φ(x) + x φ(x)` with `φ` the standard normal density,
    /// computed by the backend's [`tessera_core::Backend::gelu_backward`] (one pass where the
    /// backend fuses it).
    pub fn gelu(&self) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.gelu()?, move |g| dispatch::gelu_backward(&x, g)))
    }

    /// The error function; gradient `2 / sqrt(pi) * e^(-x^2)`.
    pub fn erf(&self) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.erf()?, move |g| {
            let slope = x
                .square()?
                .neg()?
                .exp()?
                .mul_scalar(std::f64::consts::FRAC_2_SQRT_PI)?;
            g.mul(&slope)
        }))
    }

    /// Floor; its gradient is zero.
    pub fn floor(&self) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().floor()?, |g| g.zeros_like()))
    }

    /// Ceiling; its gradient is zero.
    pub fn ceil(&self) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().ceil()?, |g| g.zeros_like()))
    }

    /// Limits every element to `[min, max]`; the gradient passes where `min <= x <= max`.
    pub fn clamp(&self, min: f64, max: f64) -> Result<Var<B>> {
        let x = self.value();
        Ok(self.unary_op(x.clamp(min, max)?, move |g| {
            let inside = x.ge_scalar(min)?.mul(&x.le_scalar(max)?)?;
            inside.where_select(g, &g.zeros_like()?)
        }))
    }
}
