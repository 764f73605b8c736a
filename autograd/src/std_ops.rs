//! `std::ops` for Vars: `&a + &b`, `&a * 2.0`, `-&a`, ... Each returns `Result<Var<B>>`, like the
//! operators of `Tensor`, because shapes, dtypes or devices may not match.

use crate::Var;
use std::ops::{Add, Div, Mul, Neg, Sub};
use tessera_core::{Backend, Result};

macro_rules! std_binary_op {
    ($trait:ident, $method:ident, $var_fn:ident, $scalar_fn:ident) => {
        impl<B: Backend> $trait<&Var<B>> for &Var<B> {
            type Output = Result<Var<B>>;
            fn $method(self, rhs: &Var<B>) -> Result<Var<B>> {
                Var::$var_fn(self, rhs)
            }
        }
        impl<B: Backend> $trait<Var<B>> for Var<B> {
            type Output = Result<Var<B>>;
            fn $method(self, rhs: Var<B>) -> Result<Var<B>> {
                Var::$var_fn(&self, &rhs)
            }
        }
        impl<B: Backend> $trait<&Var<B>> for Var<B> {
            type Output = Result<Var<B>>;
            fn $method(self, rhs: &Var<B>) -> Result<Var<B>> {
                Var::$var_fn(&self, rhs)
            }
        }
        impl<B: Backend> $trait<Var<B>> for &Var<B> {
            type Output = Result<Var<B>>;
            fn $method(self, rhs: Var<B>) -> Result<Var<B>> {
                Var::$var_fn(self, &rhs)
            }
        }
        impl<B: Backend> $trait<f64> for &Var<B> {
            type Output = Result<Var<B>>;
            fn $method(self, rhs: f64) -> Result<Var<B>> {
                Var::$scalar_fn(self, rhs)
            }
        }
        impl<B: Backend> $trait<f64> for Var<B> {
            type Output = Result<Var<B>>;
            fn $method(self, rhs: f64) -> Result<Var<B>> {
                Var::$scalar_fn(&self, rhs)
            }
        }
    };
}

std_binary_op!(Add, add, add, add_scalar);
std_binary_op!(Sub, sub, sub, sub_scalar);
std_binary_op!(Mul, mul, mul, mul_scalar);
std_binary_op!(Div, div, div, div_scalar);

impl<B: Backend> Neg for &Var<B> {
    type Output = Result<Var<B>>;
    fn neg(self) -> Result<Var<B>> {
        Var::neg(self)
    }
}

impl<B: Backend> Neg for Var<B> {
    type Output = Result<Var<B>>;
    fn neg(self) -> Result<Var<B>> {
        Var::neg(&self)
    }
}
