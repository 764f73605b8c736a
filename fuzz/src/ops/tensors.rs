//! Constructors and host transfer: `zeros`, `full`, `from_vec`, `arange`, `linspace`, `eye`,
//! random draws, `to_vec`, `to_scalar`, printing, `contiguous`, casts.

use super::kinds::*;
use super::{alloc_work, has, like_input, numel, op, out_tensor, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome, Skip};
use crate::rng::Rng;
use tessera_core::{DType, Distribution, Generator, Tensor};

/// Work of a constructor of `dims` (see [`alloc_work`]).
fn dims_work<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<usize, Skip> {
    Ok(alloc_work(numel(&c.dims(0))))
}

/// `n` host values drawn from `seed`, a few of them special.
pub fn host_values(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| match rng.below(20) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => -0.0,
            _ => (rng.below(41) as f64 - 20.0) / 4.0,
        })
        .collect()
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op("Tensor::zeros", 6, &[DIMS, DT], OUT_T, |c| {
            Ok(Tensor::zeros(c.dims(0), c.dtype(1), c.backend()).into())
        })
        .work(dims_work)
        .expect(|c, out| has(out_tensor(out)?, &c.dims(0), c.dtype(1)))
        .starter(1),
        op("Tensor::full", 4, &[DIMS, F, DT], OUT_T, |c| {
            Ok(Tensor::full(c.dims(0), c.float(1), c.dtype(2), c.backend()).into())
        })
        .work(dims_work)
        .expect(|c, out| has(out_tensor(out)?, &c.dims(0), c.dtype(2))),
        op(
            "Tensor::from_f64_values",
            10,
            &[SMALL, SEED, DT, B],
            OUT_T,
            |c| {
                let dims = c.dims(0);
                // Sometimes one value too many: a DataLength error.
                let n = numel(&dims) + usize::from(c.flag(3));
                let values = host_values(n, c.seed(1));
                Ok(Tensor::from_f64_values(&values, dims, c.dtype(2), c.backend()).into())
            },
        )
        .expect(|c, out| has(out_tensor(out)?, &c.dims(0), c.dtype(2)))
        .starter(12),
        op("Tensor::from_vec::<i64>", 4, &[IDX, SMALL], OUT_T, |c| {
            let values = c.indices(0);
            // The index values as a tensor: rank 1, or reshaped to `dims` when they fit.
            let dims = c.dims(1);
            let t = if numel(&dims) == values.len() {
                Tensor::from_vec(values, dims, c.backend())
            } else {
                let n = values.len();
                Tensor::from_vec(values, [n], c.backend())
            };
            Ok(t.into())
        })
        .starter(2),
        op("Tensor::arange", 4, &[F, F, F, DT], OUT_T, |c| {
            Ok(Tensor::arange(c.float(0), c.float(1), c.float(2), c.dtype(3), c.backend()).into())
        })
        .work(|c| {
            let n = ((c.float(1) - c.float(0)) / c.float(2)).ceil();
            Ok(if n.is_finite() && n > 0.0 {
                alloc_work(n.min(u64::MAX as f64) as usize)
            } else {
                0
            })
        }),
        op("Tensor::linspace", 3, &[F, F, SIZE, DT], OUT_T, |c| {
            Ok(Tensor::linspace(c.float(0), c.float(1), c.size(2), c.dtype(3), c.backend()).into())
        })
        .work(|c| Ok(alloc_work(c.size(2))))
        .expect(|c, out| has(out_tensor(out)?, &[c.size(2)], c.dtype(3))),
        op("Tensor::eye", 3, &[SIZE, DT], OUT_T, |c| {
            Ok(Tensor::eye(c.size(0), c.dtype(1), c.backend()).into())
        })
        .work(|c| Ok(alloc_work(c.size(0).saturating_mul(c.size(0)))))
        .expect(|c, out| {
            let (n, t) = (c.size(0), out_tensor(out)?);
            has(t, &[n, n], c.dtype(1))?;
            if n <= 16 {
                let v = t.to_vec_f64().map_err(|e| e.to_string())?;
                for (i, x) in v.iter().enumerate() {
                    if *x != f64::from(u8::from(i / n == i % n)) {
                        return Err(format!("eye({n}) has {x} at {i}"));
                    }
                }
            }
            Ok(())
        }),
        op("Tensor::rand", 3, &[DIMS, DT, SEED], OUT_T, |c| {
            Ok(Tensor::rand(c.dims(0), c.dtype(1), c.seed(2), c.backend()).into())
        })
        .work(dims_work)
        .expect(|c, out| has(out_tensor(out)?, &c.dims(0), c.dtype(1))),
        op(
            "Tensor::random",
            3,
            &[DIMS, F, F, DT, SEED, SEED],
            OUT_T,
            |c| {
                let dist = Distribution::Normal {
                    mean: c.float(1),
                    std: c.float(2),
                };
                Ok(Tensor::random(
                    c.dims(0),
                    dist,
                    c.dtype(3),
                    c.seed(4),
                    c.seed(5),
                    c.backend(),
                )
                .into())
            },
        )
        .work(dims_work),
        op(
            "Tensor::random_from",
            2,
            &[DIMS, DT, SEED, SIZE],
            OUT_T,
            |c| {
                let mut g = Generator::new(c.seed(2));
                // A generator far along its stream: the counter wraps.
                g.advance(c.size(3));
                g.advance(usize::MAX);
                let dist = Distribution::Uniform {
                    low: -1.0,
                    high: 1.0,
                };
                Ok(Tensor::random_from(c.dims(0), dist, c.dtype(1), &mut g, c.backend()).into())
            },
        )
        .work(dims_work),
        op("Tensor::to_vec_f64", 4, &[T], NONE, |c| {
            let t = c.t(0)?;
            Ok(match t.to_vec_f64() {
                Ok(v) if v.len() != t.numel() => {
                    Outcome::Break(format!("{} values for {} elements", v.len(), t.numel()))
                }
                Ok(_) => Outcome::Ok(Vec::new()),
                Err(e) => Outcome::Err(e.to_string()),
            })
        }),
        op("Tensor::to_scalar_f64", 2, &[T], NONE, |c| {
            Ok(c.t(0)?.to_scalar_f64().map(|_| ()).into())
        }),
        op("Tensor::to_vec::<f32>", 1, &[T], NONE, |c| {
            Ok(c.t(0)?.to_vec::<f32>().map(|_| ()).into())
        }),
        op("format!(\"{}\", t)", 2, &[T], NONE, |c| {
            let t = c.t(0)?;
            let text = format!("{t} {t:?}");
            Ok(if text.is_empty() {
                Outcome::Break("empty display".into())
            } else {
                Outcome::Ok(Vec::new())
            })
        }),
        op("Tensor::contiguous", 4, &[T], OUT_T, |c| {
            Ok(c.t(0)?.contiguous().into())
        })
        .expect(|c, out| {
            like_input(c, 0, out)?;
            if !out_tensor(out)?.is_contiguous() {
                return Err("contiguous() returned a non-contiguous tensor".into());
            }
            Ok(())
        }),
        op("Tensor::compact", 3, &[T], OUT_T, |c| {
            Ok(c.t(0)?.compact().into())
        })
        .expect(|c, out| {
            use tessera_core::BackendStorage;
            like_input(c, 0, out)?;
            let (x, y) = (
                c.t(0).map_err(|_| "input vanished".to_string())?,
                out_tensor(out)?,
            );
            if !y.is_contiguous() || (y.numel() > 0 && y.storage().len() != y.numel()) {
                return Err(format!(
                    "compact() gave layout {:?} over a storage of {} elements",
                    y.layout(),
                    y.storage().len()
                ));
            }
            let bits = |t: &Tensor<B>| {
                t.to_vec_f64()
                    .map(|v| v.into_iter().map(f64::to_bits).collect::<Vec<_>>())
            };
            match (bits(&x), bits(y)) {
                (Ok(a), Ok(b)) if a == b => Ok(()),
                (a, b) => Err(format!("compact() changed the elements: {a:?} / {b:?}")),
            }
        }),
        op("Tensor::to_dtype", 5, &[T, DT], OUT_T, |c| {
            Ok(c.t(0)?.to_dtype(c.dtype(1)).into())
        })
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            has(out_tensor(out)?, x.dims(), c.dtype(1))
        }),
        op("Tensor::to_dtype round trip", 3, &[T], NONE, |c| {
            // A 16-bit tensor survives the trip through its compute dtype bit for bit (the
            // widening is exact and the rounding back of an exact value changes nothing).
            let t = c.t(0)?;
            if !t.dtype().is_half() {
                return Ok(Outcome::Ok(Vec::new()));
            }
            let back = t
                .to_dtype(DType::F32)
                .and_then(|w| w.to_dtype(t.dtype()))
                .and_then(|b| Ok((b.to_vec_f64()?, t.to_vec_f64()?)));
            Ok(match back {
                Ok((got, want)) => {
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
                    if same && got.len() == want.len() {
                        Outcome::Ok(Vec::new())
                    } else {
                        Outcome::Break(format!("round trip changed {want:?} into {got:?}"))
                    }
                }
                Err(e) => Outcome::Err(e.to_string()),
            })
        }),
        op("Tensor::in_compute_dtype", 2, &[T], OUT_T, |c| {
            Ok(c.t(0)?.in_compute_dtype(|x| x.sum_all()).into())
        })
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            let dtype = if x.dtype() == DType::Bool {
                DType::I64
            } else {
                x.dtype()
            };
            has(out_tensor(out)?, &[], dtype)
        }),
        op("Tensor::scalar", 2, &[F], OUT_T, |c| {
            Ok(Tensor::scalar(c.float(0), c.backend()).into())
        })
        .expect(|_, out| has(out_tensor(out)?, &[], DType::F64))
        .starter(1),
    ]
}
