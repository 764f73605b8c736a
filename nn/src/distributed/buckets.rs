//! Grouping gradients into buckets: fewer, larger collectives instead of one per parameter.

use tessera_core::DType;

/// PyTorch DDP's default bucket capacity (`bucket_cap_mb = 25`): 25 MiB of gradients per
/// all-reduce.
pub const DEFAULT_BUCKET_BYTES: usize = 25 * 1024 * 1024;

/// Parameters whose gradients are flattened into one buffer and all-reduced together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Indices into the parameter list, in the order their gradients sit in the buffer.
    pub params: Vec<usize>,
    /// The dtype every gradient of the bucket has.
    pub dtype: DType,
    /// Elements in the flattened buffer (the sum of the parameters' sizes).
    pub numel: usize,
}

impl Bucket {
    /// Bytes of the flattened buffer.
    pub fn bytes(&self) -> usize {
        self.numel * self.dtype.size_in_bytes()
    }
}

/// Splits parameters, given as `(dtype, numel)` in registration order, into buckets of at most
/// `capacity_bytes` each (a parameter larger than that gets a bucket of its own), one dtype per
/// bucket.
///
/// The parameters are taken in **reverse** registration order, as PyTorch does: backward
/// produces the gradients of the last layers first, so these buckets are the order in which
/// they become ready.
///
/// ```
/// use tessera_core::DType;
/// use tessera_nn::distributed::plan_buckets;
/// // Three f32 parameters of 4, 2 and 3 elements; buckets of at most 20 bytes (5 floats).
/// let buckets = plan_buckets(&[(DType::F32, 4), (DType::F32, 2), (DType::F32, 3)], 20);
/// let params: Vec<Vec<usize>> = buckets.iter().map(|b| b.params.clone()).collect();
/// assert_eq!(params, vec![vec![2, 1], vec![0]]);
/// ```
pub fn plan_buckets(params: &[(DType, usize)], capacity_bytes: usize) -> Vec<Bucket> {
    let mut buckets: Vec<Bucket> = Vec::new();
    for (index, &(dtype, numel)) in params.iter().enumerate().rev() {
        let bytes = numel * dtype.size_in_bytes();
        let fits = buckets
            .last()
            .is_some_and(|b| b.dtype == dtype && b.bytes() + bytes <= capacity_bytes.max(1));
        if fits {
            let last = buckets.last_mut().expect("checked above");
            last.params.push(index);
            last.numel += numel;
        } else {
            buckets.push(Bucket {
                params: vec![index],
                dtype,
                numel,
            });
        }
    }
    buckets
}
