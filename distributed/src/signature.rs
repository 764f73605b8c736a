//! The check that every rank is in the same collective with the same arguments, made before
//! the payload moves: calling an MPI or NCCL collective with different counts on different ranks
//! is undefined behaviour (memory corruption or a hang), so each call first all-reduces a small
//! fixed-size description of itself and compares.

use tessera_core::{DType, Shape};

/// What a rank is about to do, as a few numbers every rank must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    /// Which collective: see the `*_CODE` constants.
    pub collective: u64,
    /// The reduction, for all-reduces (0 otherwise).
    pub reduction: u64,
    /// The element type (0 for host values and barriers).
    pub dtype: u64,
    /// The number of elements.
    pub count: u64,
    /// The root rank, for broadcasts.
    pub root: u64,
    /// A 48-bit hash of the shape (0 without one).
    pub shape: u64,
}

/// [`Signature::collective`] of an all-reduce of a tensor.
pub const ALL_REDUCE_CODE: u64 = 1;
/// ... of a broadcast of a tensor.
pub const BROADCAST_CODE: u64 = 2;
/// ... of a barrier.
pub const BARRIER_CODE: u64 = 3;
/// ... of an all-reduce of host values.
pub const HOST_ALL_REDUCE_CODE: u64 = 4;
/// ... of a broadcast of bytes (bootstrap data such as NCCL's unique id).
pub const BYTES_BROADCAST_CODE: u64 = 5;

/// ... of a reduce-scatter of a tensor.
pub const REDUCE_SCATTER_CODE: u64 = 6;
/// ... of an all-gather of a tensor.
pub const ALL_GATHER_CODE: u64 = 7;
/// ... of a gather of a tensor to one rank.
pub const GATHER_CODE: u64 = 8;

/// Number of `f64`s [`Signature::encode`] produces.
pub const ENCODED_LEN: usize = 12;

/// A small code per dtype.
pub fn dtype_code(dtype: DType) -> u64 {
    match dtype {
        DType::F32 => 1,
        DType::F64 => 2,
        DType::I64 => 3,
        DType::Bool => 4,
        DType::F16 => 5,
        DType::BF16 => 6,
        // A dtype added later gets its own code; until then it collides only with itself.
        _ => 15,
    }
}

/// A 48-bit FNV-1a hash of the dimensions (exact in an f64).
pub fn shape_hash(shape: &Shape) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &d in shape.dims() {
        for b in (d as u64).to_le_bytes() {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash & ((1 << 48) - 1)
}

impl Signature {
    fn fields(&self) -> [u64; 6] {
        [
            self.collective,
            self.reduction,
            self.dtype,
            self.count,
            self.root,
            self.shape,
        ]
    }

    /// The fields and their negations as f64 (each below 2⁵³, so exact): a **max**-all-reduce
    /// of these gives, per field, the largest value and minus the smallest.
    pub fn encode(&self) -> [f64; ENCODED_LEN] {
        let mut out = [0.0; ENCODED_LEN];
        for (i, v) in self.fields().into_iter().enumerate() {
            let v = (v & ((1 << 52) - 1)) as f64;
            out[2 * i] = v;
            out[2 * i + 1] = -v;
        }
        out
    }

    /// After the max-all-reduce of [`Signature::encode`]: `None` when every rank had this
    /// signature, else a description of the fields that differ (`count: 10 to 12`).
    pub fn disagreement(&self, reduced: &[f64; ENCODED_LEN]) -> Option<String> {
        const NAMES: [&str; 6] = ["collective", "reduction", "dtype", "count", "root", "shape"];
        let differing: Vec<String> = (0..6)
            .filter(|&i| reduced[2 * i] != -reduced[2 * i + 1])
            .map(|i| match NAMES[i] {
                "count" | "root" => format!(
                    "{} ranges from {} to {}",
                    NAMES[i],
                    -reduced[2 * i + 1],
                    reduced[2 * i]
                ),
                name => format!("{name} differs"),
            })
            .collect();
        (!differing.is_empty()).then(|| {
            format!(
                "the ranks called different collectives or passed different arguments ({}); \
                 this rank called {}",
                differing.join(", "),
                self.describe()
            )
        })
    }

    /// `all_reduce of 12 f32 elements` and the like, for messages.
    pub fn describe(&self) -> String {
        let what = match self.collective {
            ALL_REDUCE_CODE => "all_reduce",
            BROADCAST_CODE => "broadcast",
            BARRIER_CODE => return "barrier".into(),
            HOST_ALL_REDUCE_CODE => "all_reduce_host",
            BYTES_BROADCAST_CODE => "broadcast_bytes",
            REDUCE_SCATTER_CODE => "reduce_scatter",
            ALL_GATHER_CODE => "all_gather",
            GATHER_CODE => "gather",
            _ => "an unknown collective",
        };
        let dtype = match self.dtype {
            1 => " f32",
            2 => " f64",
            3 => " i64",
            4 => " bool",
            _ => "",
        };
        format!("{what} of {}{dtype} elements", self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn max_reduce(all: &[[f64; ENCODED_LEN]]) -> [f64; ENCODED_LEN] {
        let mut out = all[0];
        for other in &all[1..] {
            for (o, v) in out.iter_mut().zip(other) {
                *o = o.max(*v);
            }
        }
        out
    }

    fn sig(count: u64, root: u64) -> Signature {
        Signature {
            collective: BROADCAST_CODE,
            reduction: 0,
            dtype: dtype_code(DType::F32),
            count,
            root,
            shape: shape_hash(&Shape::from(vec![count as usize])),
        }
    }

    #[test]
    fn equal_signatures_agree_and_any_difference_is_named() {
        let a = sig(10, 0);
        assert_eq!(a.disagreement(&max_reduce(&[a.encode(), a.encode()])), None);
        let msg = a
            .disagreement(&max_reduce(&[a.encode(), sig(12, 0).encode()]))
            .unwrap();
        assert!(msg.contains("count ranges from 10 to 12"), "{msg}");
        assert!(msg.contains("broadcast of 10 f32 elements"), "{msg}");
        let msg = a
            .disagreement(&max_reduce(&[sig(10, 1).encode(), a.encode()]))
            .unwrap();
        assert!(msg.contains("root ranges from 0 to 1"), "{msg}");
        let barrier = Signature {
            collective: BARRIER_CODE,
            ..Signature::default_for_tests()
        };
        assert!(a
            .disagreement(&max_reduce(&[a.encode(), barrier.encode()]))
            .unwrap()
            .contains("collective differs"));
    }

    #[test]
    fn shapes_with_the_same_count_differ() {
        let s1 = shape_hash(&Shape::from(vec![2, 3]));
        let s2 = shape_hash(&Shape::from(vec![3, 2]));
        assert_ne!(s1, s2);
        assert!(s1 < 1 << 48);
    }

    impl Signature {
        fn default_for_tests() -> Self {
            Signature {
                collective: 0,
                reduction: 0,
                dtype: 0,
                count: 0,
                root: 0,
                shape: 0,
            }
        }
    }
}
