//! The primitives, one concept per module, written once over any [`crate::Driver`].
//! Each takes storages already checked by `crate::checks` (same device, layouts inside
//! their storages) and queues kernels; none waits for the device except `transfer::download`.

pub(crate) mod adam;
pub(crate) mod attention;
pub(crate) mod attention_materialized;
pub(crate) mod blas_layout;
pub(crate) mod conv;
pub(crate) mod cross_entropy;
pub(crate) mod elementwise;
pub(crate) mod indexing;
pub(crate) mod matmul;
pub(crate) mod operands;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod softmax;
pub(crate) mod transfer;
