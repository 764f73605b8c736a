//! Numerical verification of gradients: the analytic gradient `backward` computes against
//! central finite differences in f64.

use crate::grad_mode::{enable_grad, no_grad};
use crate::Var;
use tessera_core::{Backend, DType, Error, Result, Tensor};

/// Settings of [`gradcheck`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradcheckOptions {
    /// Finite-difference step: `(f(x + eps) - f(x - eps)) / (2 eps)`.
    pub eps: f64,
    /// Absolute tolerance: an element passes when `|analytic - numeric| <= atol + rtol |numeric|`.
    pub atol: f64,
    /// Relative tolerance (see `atol`).
    pub rtol: f64,
    /// Seed of the random projection applied to the output.
    pub seed: u64,
}

impl Default for GradcheckOptions {
    /// `eps = 1e-6`, `atol = 1e-5`, `rtol = 1e-3` (PyTorch's gradcheck defaults), seed 0.
    fn default() -> Self {
        GradcheckOptions {
            eps: 1e-6,
            atol: 1e-5,
            rtol: 1e-3,
            seed: 0,
        }
    }
}

/// What a successful [`gradcheck`] measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GradcheckReport {
    /// Largest `|analytic - numeric|` over all checked elements.
    pub max_abs_error: f64,
    /// Largest `|analytic - numeric| / max(|analytic|, |numeric|)` (0 where both are 0).
    pub max_rel_error: f64,
    /// Number of input elements checked.
    pub elements_checked: usize,
}

fn invalid(msg: String) -> Error {
    Error::InvalidArgument {
        op: "gradcheck",
        msg,
    }
}

/// `sum(y * r)` on the host.
fn projected(y: &Tensor<impl Backend>, r: &[f64]) -> Result<f64> {
    Ok(y.to_vec_f64()?.iter().zip(r).map(|(a, b)| a * b).sum())
}

/// Checks the gradients of `f` at `inputs` (all f64).
///
/// The scalar checked is `L = sum(f(inputs) * r)` with `r` a fixed standard-normal tensor of the
/// output's shape, so every output element contributes. Its analytic gradient (one `backward`
/// through `f`) is compared, element by element of every input, with the central difference
/// `(L(x + eps) - L(x - eps)) / (2 eps)`. Inputs may be non-contiguous; the perturbed copies are
/// contiguous. Returns the largest errors, or `Error::InvalidArgument` naming the first input
/// element whose gradient is off, with both values. Keep inputs away from kinks (e.g. `relu` at
/// 0, ties of `max`) where the two legitimately differ.
pub fn gradcheck<B: Backend>(
    f: impl Fn(&[Var<B>]) -> Result<Var<B>>,
    inputs: &[Tensor<B>],
    opts: GradcheckOptions,
) -> Result<GradcheckReport> {
    if let Some((i, t)) = inputs
        .iter()
        .enumerate()
        .find(|(_, t)| t.dtype() != DType::F64)
    {
        return Err(invalid(format!("input {i} is {}, expected f64", t.dtype())));
    }
    if !(opts.eps > 0.0 && opts.eps.is_finite()) {
        return Err(invalid(format!("eps must be positive, got {}", opts.eps)));
    }

    // Analytic gradients of sum(y * r), through one backward with seed r.
    let params: Vec<Var<B>> = inputs.iter().map(|t| Var::param(t.clone())).collect();
    let y = enable_grad(|| f(&params))?;
    if y.dtype() != DType::F64 {
        return Err(invalid(format!("f returned {}, expected f64", y.dtype())));
    }
    let out = y.value();
    let r = Tensor::randn(out.shape(), DType::F64, opts.seed, out.backend())?;
    if y.requires_grad() {
        y.backward_with(&r)?;
    }
    let r = r.to_vec_f64()?;
    let analytic = params
        .iter()
        .map(|p| match p.grad() {
            Some(g) => g.to_vec_f64(),
            None => Ok(vec![0.0; p.numel()]),
        })
        .collect::<Result<Vec<_>>>()?;

    // Central differences, one input element at a time.
    let evaluate = |which: usize, values: &[f64]| -> Result<f64> {
        let perturbed = Tensor::from_vec(values.to_vec(), inputs[which].shape(), out.backend())?;
        let consts: Vec<Var<B>> = inputs
            .iter()
            .enumerate()
            .map(|(j, t)| {
                Var::constant(if j == which {
                    perturbed.clone()
                } else {
                    t.clone()
                })
            })
            .collect();
        let y = no_grad(|| f(&consts))?.value();
        if y.shape() != out.shape() {
            return Err(invalid(format!(
                "f returned shape {} for a perturbed input but {} before",
                y.shape(),
                out.shape()
            )));
        }
        projected(&y, &r)
    };
    let mut report = GradcheckReport::default();
    for (which, input) in inputs.iter().enumerate() {
        let mut values = input.to_vec_f64()?;
        for element in 0..values.len() {
            let original = values[element];
            values[element] = original + opts.eps;
            let plus = evaluate(which, &values)?;
            values[element] = original - opts.eps;
            let minus = evaluate(which, &values)?;
            values[element] = original;

            let numeric = (plus - minus) / (2.0 * opts.eps);
            let exact = analytic[which][element];
            let abs_error = (exact - numeric).abs();
            let scale = exact.abs().max(numeric.abs());
            let rel_error = if scale > 0.0 { abs_error / scale } else { 0.0 };
            if abs_error.is_nan() || abs_error > opts.atol + opts.rtol * numeric.abs() {
                return Err(invalid(format!(
                    "input {which} element {element}: analytic gradient {exact} vs numeric \
                     {numeric} (abs error {abs_error:e}, rel error {rel_error:e})"
                )));
            }
            report.max_abs_error = report.max_abs_error.max(abs_error);
            report.max_rel_error = report.max_rel_error.max(rel_error);
            report.elements_checked += 1;
        }
    }
    Ok(report)
}
