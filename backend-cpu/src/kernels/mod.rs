//! The CPU kernels, one concept per module. Each entry point takes storages and layouts that
//! the backend has already checked to fit (see `crate::checks`) and returns a fresh contiguous
//! output.

pub(crate) mod adam;
pub(crate) mod arg_reduce;
pub(crate) mod attention;
pub(crate) mod binary;
pub(crate) mod cast;
pub(crate) mod compare;
pub(crate) mod conv;
pub(crate) mod conv_bf16;
pub(crate) mod copy;
pub(crate) mod cross_entropy;
pub(crate) mod fill;
pub(crate) mod gather;
pub(crate) mod gelu_grad;
pub(crate) mod gemm;
pub(crate) mod gemm_amx;
pub(crate) mod gemm_bf16;
pub(crate) mod gemm_bf16_columns;
pub(crate) mod gemv_bf16;
pub(crate) mod index_check;
pub(crate) mod index_select;
pub(crate) mod lanes;
pub(crate) mod layer_norm;
pub(crate) mod map;
pub(crate) mod matmul;
pub(crate) mod num;
pub(crate) mod pool;
pub(crate) mod pool_bf16;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod reducer;
pub(crate) mod relu_grad;
pub(crate) mod scatter_add;
pub(crate) mod select;
pub(crate) mod softmax;
pub(crate) mod unary;
pub(crate) mod vector_math;
pub(crate) mod wide;
