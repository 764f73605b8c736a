//! Gradient checks of every differentiable op of `Var` against central finite differences in
//! f64, over random small shapes, broadcasting pairs and non-contiguous inputs.

mod common;

mod attention;
mod binary;
mod indexing;
mod linalg;
mod nn;
mod reduce;
mod self_check;
mod unary;
mod views;
