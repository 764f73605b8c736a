//! One Adam/AdamW step in a single pass over contiguous parameter, gradient and moments. It
//! performs the same f32/f64 operations in the same order as the composite chain
//! (`tessera_core::composite::adam_update`), so the results are identical bit for bit.

use std::mem::MaybeUninit;

use rayon::prelude::*;
use tessera_core::backend::AdamUpdate;
use tessera_core::{Error, Result};

use super::num::Num;
use crate::alloc::{assume_init, try_uninit};
use crate::parallel::Parallelism;

/// A float the Adam kernel runs on.
pub(crate) trait AdamFloat:
    Num
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    /// `v` rounded to this type, as a scalar operand of the composite is.
    fn from_f64(v: f64) -> Self;
    /// The square root.
    fn sqrt(self) -> Self;
}

impl AdamFloat for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}

impl AdamFloat for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

/// The inputs of one step, all of one length.
pub(crate) struct AdamInputs<'a, T> {
    /// The parameter.
    pub(crate) param: &'a [T],
    /// Its gradient.
    pub(crate) grad: &'a [T],
    /// The first moment.
    pub(crate) exp_avg: &'a [T],
    /// The second moment.
    pub(crate) exp_avg_sq: &'a [T],
    /// The AMSGrad running maximum, if any.
    pub(crate) max_exp_avg_sq: Option<&'a [T]>,
}

/// The outputs of one step: parameter, first and second moment, and the AMSGrad maximum.
pub(crate) type AdamOutputs<T> = (Vec<T>, Vec<T>, Vec<T>, Option<Vec<T>>);

/// Runs the step over every element.
pub(crate) fn adam_update<T: AdamFloat>(
    x: &AdamInputs<'_, T>,
    u: &AdamUpdate,
) -> Result<AdamOutputs<T>> {
    adam_update_with(Parallelism::current(), x, u)
}

/// [`adam_update`] with explicit parallelism thresholds.
pub(crate) fn adam_update_with<T: AdamFloat>(
    split: Parallelism,
    x: &AdamInputs<'_, T>,
    u: &AdamUpdate,
) -> Result<AdamOutputs<T>> {
    let len = x.param.len();
    let lengths = [
        x.grad.len(),
        x.exp_avg.len(),
        x.exp_avg_sq.len(),
        x.max_exp_avg_sq.map_or(len, <[T]>::len),
    ];
    if lengths.iter().any(|&l| l != len) {
        return Err(Error::InvalidArgument {
            op: "adam_update",
            msg: format!("the parameter has {len} elements but the other operands {lengths:?}"),
        });
    }
    let mut param = try_uninit::<T>(len)?;
    let mut exp_avg = try_uninit::<T>(len)?;
    let mut exp_avg_sq = try_uninit::<T>(len)?;
    let mut max = x.max_exp_avg_sq.map(|_| try_uninit::<T>(len)).transpose()?;
    let chunk = if split.worth_parallel(len) {
        split.chunk_len(len)
    } else {
        len.max(1)
    };
    let coefficients = Coefficients::new(u);
    let run = |i: usize, out: Outputs<'_, T>| {
        let start = i * chunk;
        let end = start + out.param.len();
        let inputs = AdamInputs {
            param: &x.param[start..end],
            grad: &x.grad[start..end],
            exp_avg: &x.exp_avg[start..end],
            exp_avg_sq: &x.exp_avg_sq[start..end],
            max_exp_avg_sq: x.max_exp_avg_sq.map(|m| &m[start..end]),
        };
        step_chunk(&inputs, &coefficients, out);
    };
    match max.as_mut() {
        Some(max) => param
            .par_chunks_mut(chunk)
            .zip(exp_avg.par_chunks_mut(chunk))
            .zip(exp_avg_sq.par_chunks_mut(chunk))
            .zip(max.par_chunks_mut(chunk))
            .enumerate()
            .for_each(|(i, (((param, exp_avg), exp_avg_sq), max))| {
                run(
                    i,
                    Outputs {
                        param,
                        exp_avg,
                        exp_avg_sq,
                        max: Some(max),
                    },
                )
            }),
        None => param
            .par_chunks_mut(chunk)
            .zip(exp_avg.par_chunks_mut(chunk))
            .zip(exp_avg_sq.par_chunks_mut(chunk))
            .enumerate()
            .for_each(|(i, ((param, exp_avg), exp_avg_sq))| {
                run(
                    i,
                    Outputs {
                        param,
                        exp_avg,
                        exp_avg_sq,
                        max: None,
                    },
                )
            }),
    }
    // SAFETY: the chunks cover every element and `step_chunk` writes each output element
    // (every input has the length of the outputs, checked above).
    unsafe {
        Ok((
            assume_init(param),
            assume_init(exp_avg),
            assume_init(exp_avg_sq),
            max.map(|m| assume_init(m)),
        ))
    }
}

/// The outputs of one chunk, to be written in full.
struct Outputs<'a, T> {
    param: &'a mut [MaybeUninit<T>],
    exp_avg: &'a mut [MaybeUninit<T>],
    exp_avg_sq: &'a mut [MaybeUninit<T>],
    max: Option<&'a mut [MaybeUninit<T>]>,
}

/// The step's scalars, rounded to the element type as the composite's scalar operands are.
struct Coefficients<T> {
    beta1: T,
    one_minus_beta1: T,
    beta2: T,
    one_minus_beta2: T,
    decay: Option<T>,
    factor: Option<T>,
    bias_correction2_sqrt: T,
    eps: T,
    step_size: T,
}

impl<T: AdamFloat> Coefficients<T> {
    fn new(u: &AdamUpdate) -> Self {
        let f = T::from_f64;
        Coefficients {
            beta1: f(u.beta1),
            one_minus_beta1: f(1.0 - u.beta1),
            beta2: f(u.beta2),
            one_minus_beta2: f(1.0 - u.beta2),
            decay: (u.coupled_decay != 0.0).then(|| f(u.coupled_decay)),
            factor: (u.decoupled_factor != 1.0).then(|| f(u.decoupled_factor)),
            bias_correction2_sqrt: f(u.bias_correction2_sqrt),
            eps: f(u.eps),
            step_size: f(u.step_size),
        }
    }
}

/// The step over one chunk: the plain loop (no decay, no AMSGrad) is a straight zip the
/// compiler vectorises; the other cases take the general loop.
fn step_chunk<T: AdamFloat>(x: &AdamInputs<'_, T>, c: &Coefficients<T>, out: Outputs<'_, T>) {
    let Outputs {
        param,
        exp_avg,
        exp_avg_sq,
        max,
    } = out;
    let moments = |g: T, m: T, v: T| {
        (
            m * c.beta1 + g * c.one_minus_beta1,
            v * c.beta2 + (g * g) * c.one_minus_beta2,
        )
    };
    let new_param = |p: T, m: T, second: T| {
        let denom = second.sqrt() / c.bias_correction2_sqrt + c.eps;
        p - (m / denom) * c.step_size
    };
    if c.decay.is_none() && c.factor.is_none() && max.is_none() {
        let inputs = x.param.iter().zip(x.grad).zip(x.exp_avg).zip(x.exp_avg_sq);
        let outputs = param
            .iter_mut()
            .zip(exp_avg.iter_mut())
            .zip(exp_avg_sq.iter_mut());
        for ((((&p, &g), &m0), &v0), ((p_out, m_out), v_out)) in inputs.zip(outputs) {
            let (m, v) = moments(g, m0, v0);
            p_out.write(new_param(p, m, v));
            m_out.write(m);
            v_out.write(v);
        }
        return;
    }
    let mut max = max;
    for i in 0..param.len() {
        let mut p = x.param[i];
        let mut g = x.grad[i];
        if let Some(decay) = c.decay {
            g = g + p * decay;
        }
        if let Some(factor) = c.factor {
            p = p * factor;
        }
        let (m, v) = moments(g, x.exp_avg[i], x.exp_avg_sq[i]);
        let second = match (max.as_deref_mut(), x.max_exp_avg_sq) {
            (Some(out), Some(prev)) => {
                let mx = prev[i].max_nan(v);
                out[i].write(mx);
                mx
            }
            _ => v,
        };
        param[i].write(new_param(p, m, second));
        exp_avg[i].write(m);
        exp_avg_sq[i].write(v);
    }
}

#[cfg(test)]
mod tests {
    //! Miri-sized tests of the `MaybeUninit` outputs: every element must be written before
    //! `assume_init` (Miri reports a read of an uninitialised one), on one chunk and on many
    //! parallel chunks (`miri_` prefix: see `docs/SOUNDNESS.md`).
    use super::*;

    /// One step of one element, written out as the composite defines it.
    fn scalar_step(u: &AdamUpdate, p: f64, g: f64, m: f64, v: f64, max: Option<f64>) -> [f64; 4] {
        let g = if u.coupled_decay != 0.0 {
            g + p * u.coupled_decay
        } else {
            g
        };
        let p = if u.decoupled_factor != 1.0 {
            p * u.decoupled_factor
        } else {
            p
        };
        let m = m * u.beta1 + g * (1.0 - u.beta1);
        let v = v * u.beta2 + (g * g) * (1.0 - u.beta2);
        let max = max.map(|mx| mx.max(v));
        let second = max.unwrap_or(v);
        let p = p - (m / (second.sqrt() / u.bias_correction2_sqrt + u.eps)) * u.step_size;
        [p, m, v, max.unwrap_or(f64::NAN)]
    }

    #[test]
    fn miri_every_output_is_written_on_every_path() {
        let len = 7;
        let at = |seed: f64| -> Vec<f64> { (0..len).map(|i| seed + i as f64 * 0.25).collect() };
        let (param, grad, exp_avg, exp_avg_sq, max) =
            (at(1.0), at(-0.5), at(0.1), at(0.2), at(0.3));
        let plain = AdamUpdate {
            beta1: 0.9,
            beta2: 0.999,
            step_size: 0.01,
            bias_correction2_sqrt: 0.5,
            eps: 1e-8,
            coupled_decay: 0.0,
            decoupled_factor: 1.0,
        };
        let updates = [
            plain,
            AdamUpdate {
                coupled_decay: 0.1,
                ..plain
            },
            AdamUpdate {
                decoupled_factor: 0.99,
                ..plain
            },
        ];
        let serial = Parallelism {
            threads: 1,
            ..Parallelism::eager(1)
        };
        for u in updates {
            for amsgrad in [false, true] {
                let inputs = AdamInputs {
                    param: &param,
                    grad: &grad,
                    exp_avg: &exp_avg,
                    exp_avg_sq: &exp_avg_sq,
                    max_exp_avg_sq: amsgrad.then_some(&max[..]),
                };
                for split in [serial, Parallelism::eager(2)] {
                    let (p, m, v, mx) = adam_update_with(split, &inputs, &u).unwrap();
                    for i in 0..len {
                        let want = scalar_step(
                            &u,
                            param[i],
                            grad[i],
                            exp_avg[i],
                            exp_avg_sq[i],
                            amsgrad.then(|| max[i]),
                        );
                        assert_eq!([p[i], m[i], v[i]], [want[0], want[1], want[2]]);
                        if let Some(mx) = &mx {
                            assert_eq!(mx[i], want[3]);
                        }
                    }
                    assert_eq!(mx.is_some(), amsgrad);
                }
            }
        }
    }

    #[test]
    fn miri_operands_of_other_lengths_are_errors_before_any_output_exists() {
        let short = [1.0f32; 2];
        let long = [1.0f32; 3];
        let inputs = AdamInputs {
            param: &long,
            grad: &long,
            exp_avg: &short,
            exp_avg_sq: &long,
            max_exp_avg_sq: None,
        };
        let u = AdamUpdate {
            beta1: 0.9,
            beta2: 0.999,
            step_size: 0.01,
            bias_correction2_sqrt: 1.0,
            eps: 1e-8,
            coupled_decay: 0.0,
            decoupled_factor: 1.0,
        };
        assert!(adam_update_with(Parallelism::eager(2), &inputs, &u).is_err());
        let empty: [f32; 0] = [];
        let inputs = AdamInputs {
            param: &empty,
            grad: &empty,
            exp_avg: &empty,
            exp_avg_sq: &empty,
            max_exp_avg_sq: Some(&empty),
        };
        let (p, _, _, mx) = adam_update_with(Parallelism::eager(2), &inputs, &u).unwrap();
        assert!(p.is_empty() && mx.unwrap().is_empty());
    }
}
