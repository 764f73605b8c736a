//! `std::ops` for tensors: `&a + &b`, `&a * 2.0`, `-&a`, ... Each returns `Result<Tensor<B>>`
//! because shapes, dtypes or devices may not match.

use super::Tensor;
use crate::{Backend, Result};
use std::ops::{Add, Div, Mul, Neg, Sub};

macro_rules! std_binary_op {
    ($trait:ident, $method:ident, $tensor_fn:ident, $scalar_fn:ident) => {
        impl<B: Backend> $trait<&Tensor<B>> for &Tensor<B> {
            type Output = Result<Tensor<B>>;
            fn $method(self, rhs: &Tensor<B>) -> Result<Tensor<B>> {
                Tensor::$tensor_fn(self, rhs)
            }
        }
        impl<B: Backend> $trait<Tensor<B>> for Tensor<B> {
            type Output = Result<Tensor<B>>;
            fn $method(self, rhs: Tensor<B>) -> Result<Tensor<B>> {
                Tensor::$tensor_fn(&self, &rhs)
            }
        }
        impl<B: Backend> $trait<&Tensor<B>> for Tensor<B> {
            type Output = Result<Tensor<B>>;
            fn $method(self, rhs: &Tensor<B>) -> Result<Tensor<B>> {
                Tensor::$tensor_fn(&self, rhs)
            }
        }
        impl<B: Backend> $trait<f64> for &Tensor<B> {
            type Output = Result<Tensor<B>>;
            fn $method(self, rhs: f64) -> Result<Tensor<B>> {
                Tensor::$scalar_fn(self, rhs)
            }
        }
        impl<B: Backend> $trait<f64> for Tensor<B> {
            type Output = Result<Tensor<B>>;
            fn $method(self, rhs: f64) -> Result<Tensor<B>> {
                Tensor::$scalar_fn(&self, rhs)
            }
        }
    };
}

std_binary_op!(Add, add, add, add_scalar);
std_binary_op!(Sub, sub, sub, sub_scalar);
std_binary_op!(Mul, mul, mul, mul_scalar);
std_binary_op!(Div, div, div, div_scalar);

impl<B: Backend> Neg for &Tensor<B> {
    type Output = Result<Tensor<B>>;
    fn neg(self) -> Result<Tensor<B>> {
        Tensor::neg(self)
    }
}

impl<B: Backend> Neg for Tensor<B> {
    type Output = Result<Tensor<B>>;
    fn neg(self) -> Result<Tensor<B>> {
        Tensor::neg(&self)
    }
}
