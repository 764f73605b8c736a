//! Weight initialisers with PyTorch's formulas (`torch.nn.init`).
//!
//! Every initialiser draws from a [`Generator`] (counter-based, so the same seed gives the same
//! weights on every backend) and returns a fresh tensor of the requested shape and dtype.
//!
//! * fans ([`fan_in_and_fan_out`]): for a weight of shape `[out, in, k...]`, `fan_in = in · Πk`
//!   and `fan_out = out · Πk`;
//! * gains ([`calculate_gain`]): linear/conv/sigmoid 1, tanh 5/3, relu √2,
//!   leaky_relu √(2 / (1 + slope²)), selu 3/4;
//! * kaiming: `std = gain / √fan`, uniform bound `√3 · std`;
//! * xavier: `std = gain · √(2 / (fan_in + fan_out))`, uniform bound `√3 · std`.

use tessera_core::{Backend, DType, Distribution, Error, Generator, Result, Shape, Tensor};

/// The non-linearity a layer is followed by, which sets the gain of the initialisation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Nonlinearity {
    /// No non-linearity (also right for convolutions): gain 1.
    Linear,
    /// Sigmoid: gain 1.
    Sigmoid,
    /// Tanh: gain 5/3.
    Tanh,
    /// ReLU: gain √2.
    Relu,
    /// Leaky ReLU with this negative slope: gain √(2 / (1 + slope²)).
    LeakyRelu(f64),
    /// SELU: gain 3/4.
    Selu,
}

/// The recommended gain for `nonlinearity` (PyTorch's `calculate_gain`).
pub fn calculate_gain(nonlinearity: Nonlinearity) -> f64 {
    match nonlinearity {
        Nonlinearity::Linear | Nonlinearity::Sigmoid => 1.0,
        Nonlinearity::Tanh => 5.0 / 3.0,
        Nonlinearity::Relu => 2f64.sqrt(),
        Nonlinearity::LeakyRelu(slope) => (2.0 / (1.0 + slope * slope)).sqrt(),
        Nonlinearity::Selu => 0.75,
    }
}

/// Which fan kaiming initialisation preserves the variance of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// Preserve the variance of the activations in the forward pass (PyTorch's default).
    FanIn,
    /// Preserve the variance of the gradients in the backward pass.
    FanOut,
}

/// `(fan_in, fan_out)` of a weight of shape `[out, in, k...]`; the shape needs rank >= 2.
pub fn fan_in_and_fan_out(dims: &[usize]) -> Result<(usize, usize)> {
    if dims.len() < 2 {
        return Err(Error::InvalidArgument {
            op: "fan_in_and_fan_out",
            msg: format!(
                "fans need a weight of rank >= 2, got shape {}",
                Shape::new(dims)
            ),
        });
    }
    // Within the size limits, no product of dims overflows (a larger weight could not exist).
    Shape::new(dims).check_size("fan_in_and_fan_out")?;
    let receptive: usize = dims[2..].iter().product();
    Ok((dims[1] * receptive, dims[0] * receptive))
}

/// The fan `mode` selects for a weight of shape `dims`.
fn select_fan(dims: &[usize], mode: FanMode) -> Result<usize> {
    let (fan_in, fan_out) = fan_in_and_fan_out(dims)?;
    Ok(match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    })
}

/// `std = gain / √fan`, or an error for a zero fan (PyTorch warns and returns an empty draw).
fn kaiming_std(dims: &[usize], mode: FanMode, nonlinearity: Nonlinearity) -> Result<f64> {
    let fan = select_fan(dims, mode)?;
    if fan == 0 {
        return Err(Error::InvalidArgument {
            op: "kaiming_init",
            msg: format!("weight of shape {} has a zero fan", Shape::new(dims)),
        });
    }
    Ok(calculate_gain(nonlinearity) / (fan as f64).sqrt())
}

/// `std = gain · √(2 / (fan_in + fan_out))`, or an error when both fans are zero.
fn xavier_std(dims: &[usize], gain: f64) -> Result<f64> {
    let (fan_in, fan_out) = fan_in_and_fan_out(dims)?;
    if fan_in + fan_out == 0 {
        return Err(Error::InvalidArgument {
            op: "xavier_init",
            msg: format!("weight of shape {} has zero fans", Shape::new(dims)),
        });
    }
    Ok(gain * (2.0 / (fan_in + fan_out) as f64).sqrt())
}

/// Samples of `U(low, high)`; errors unless `low <= high` and both are finite.
pub fn uniform<B: Backend>(
    shape: impl Into<Shape>,
    low: f64,
    high: f64,
    dtype: DType,
    generator: &mut Generator,
    backend: &B,
) -> Result<Tensor<B>> {
    if !(low.is_finite() && high.is_finite() && low <= high) {
        return Err(Error::InvalidArgument {
            op: "uniform_init",
            msg: format!("bounds must be finite with low <= high, got [{low}, {high})"),
        });
    }
    Tensor::random_from(
        shape,
        Distribution::Uniform { low, high },
        dtype,
        generator,
        backend,
    )
}

/// Samples of `N(mean, std²)`; errors unless `std >= 0` and both are finite.
pub fn normal<B: Backend>(
    shape: impl Into<Shape>,
    mean: f64,
    std: f64,
    dtype: DType,
    generator: &mut Generator,
    backend: &B,
) -> Result<Tensor<B>> {
    if !(mean.is_finite() && std.is_finite() && std >= 0.0) {
        return Err(Error::InvalidArgument {
            op: "normal_init",
            msg: format!("mean and std must be finite with std >= 0, got {mean} and {std}"),
        });
    }
    Tensor::random_from(
        shape,
        Distribution::Normal { mean, std },
        dtype,
        generator,
        backend,
    )
}

/// A tensor of zeros (PyTorch's `zeros_`).
pub fn zeros<B: Backend>(shape: impl Into<Shape>, dtype: DType, backend: &B) -> Result<Tensor<B>> {
    Tensor::zeros(shape, dtype, backend)
}

/// A tensor of ones (PyTorch's `ones_`).
pub fn ones<B: Backend>(shape: impl Into<Shape>, dtype: DType, backend: &B) -> Result<Tensor<B>> {
    Tensor::ones(shape, dtype, backend)
}

/// Kaiming (He) uniform: `U(-b, b)` with `b = √3 · gain / √fan`. For `LeakyRelu(√5)` with
/// `FanIn` this is PyTorch's default `Linear`/`Conv2d` weight init, `b = 1 / √fan_in`.
pub fn kaiming_uniform<B: Backend>(
    shape: impl Into<Shape>,
    mode: FanMode,
    nonlinearity: Nonlinearity,
    dtype: DType,
    generator: &mut Generator,
    backend: &B,
) -> Result<Tensor<B>> {
    let shape = shape.into();
    let bound = 3f64.sqrt() * kaiming_std(shape.dims(), mode, nonlinearity)?;
    uniform(shape, -bound, bound, dtype, generator, backend)
}

/// Kaiming (He) normal: `N(0, std²)` with `std = gain / √fan`.
pub fn kaiming_normal<B: Backend>(
    shape: impl Into<Shape>,
    mode: FanMode,
    nonlinearity: Nonlinearity,
    dtype: DType,
    generator: &mut Generator,
    backend: &B,
) -> Result<Tensor<B>> {
    let shape = shape.into();
    let std = kaiming_std(shape.dims(), mode, nonlinearity)?;
    normal(shape, 0.0, std, dtype, generator, backend)
}

/// Xavier (Glorot) uniform: `U(-b, b)` with `b = gain · √(6 / (fan_in + fan_out))`.
pub fn xavier_uniform<B: Backend>(
    shape: impl Into<Shape>,
    gain: f64,
    dtype: DType,
    generator: &mut Generator,
    backend: &B,
) -> Result<Tensor<B>> {
    let shape = shape.into();
    let bound = 3f64.sqrt() * xavier_std(shape.dims(), gain)?;
    uniform(shape, -bound, bound, dtype, generator, backend)
}

/// Xavier (Glorot) normal: `N(0, std²)` with `std = gain · √(2 / (fan_in + fan_out))`.
pub fn xavier_normal<B: Backend>(
    shape: impl Into<Shape>,
    gain: f64,
    dtype: DType,
    generator: &mut Generator,
    backend: &B,
) -> Result<Tensor<B>> {
    let shape = shape.into();
    let std = xavier_std(shape.dims(), gain)?;
    normal(shape, 0.0, std, dtype, generator, backend)
}

/// PyTorch's default initialisation of a `Linear`/`Conv2d` weight of shape `[out, in, k...]`:
/// `kaiming_uniform(a = √5)`, i.e. `U(-1/√fan_in, 1/√fan_in)`.
pub fn default_weight<B: Backend>(
    shape: impl Into<Shape>,
    dtype: DType,
    generator: &mut Generator,
    backend: &B,
) -> Result<Tensor<B>> {
    kaiming_uniform(
        shape,
        FanMode::FanIn,
        Nonlinearity::LeakyRelu(5f64.sqrt()),
        dtype,
        generator,
        backend,
    )
}

/// PyTorch's default initialisation of a `Linear`/`Conv2d` bias of length `len` for a layer of
/// fan-in `fan_in`: `U(-1/√fan_in, 1/√fan_in)` (zeros when the fan-in is zero).
pub fn default_bias<B: Backend>(
    len: usize,
    fan_in: usize,
    dtype: DType,
    generator: &mut Generator,
    backend: &B,
) -> Result<Tensor<B>> {
    let bound = if fan_in > 0 {
        1.0 / (fan_in as f64).sqrt()
    } else {
        0.0
    };
    uniform([len], -bound, bound, dtype, generator, backend)
}
