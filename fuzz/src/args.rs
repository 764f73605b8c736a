//! The arguments of a program step: what kinds there are ([`ArgKind`]), how each is drawn (mostly
//! plausible, often invalid, sometimes absurd), and the drawn values ([`Arg`]), printed the way
//! they would be written in Rust.

use crate::rng::Rng;
use std::fmt;
use tessera_core::{Conv2dParams, DType, Pool2dParams};

/// The kinds of values a program keeps in its registers, and the register references of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A `Tensor<B>`.
    Tensor,
    /// An `tessera_autograd::Var<B>`.
    Var,
    /// An `nn` layer (a `Box<dyn Module<B>>`).
    Layer,
    /// An `nn` optimizer (a `Box<dyn Optimizer<B>>`).
    Optim,
}

impl Kind {
    /// The register prefix in printed programs: `t3`, `v0`, `l1`, `o2`.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Tensor => "t",
            Kind::Var => "v",
            Kind::Layer => "l",
            Kind::Optim => "o",
        }
    }
}

/// How one argument of an operation is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A reference to an existing register of this kind.
    Reg(Kind),
    /// A shape: mostly small dims, sometimes 0, sometimes huge; any rank up to 8, rarely
    /// more than the limit.
    Dims,
    /// A rank-sized list of small dims, safe to fill with data (at most 64 elements).
    SmallDims,
    /// An axis: usually in range for small ranks, sometimes negative, sometimes absurd.
    Axis,
    /// A list of axes (for reductions).
    Axes,
    /// A permutation-like list (sometimes not a permutation).
    Perm,
    /// A start, length, step or size: small, sometimes 0, sometimes huge.
    Size,
    /// A float: ordinary values and the special ones (NaN, infinities, -0.0, huge, tiny).
    Float,
    /// A dtype.
    DType,
    /// A flag.
    Bool,
    /// A random seed or counter offset, including values near `u64::MAX`.
    Seed,
    /// Index values for indexing ops: in range, negative, huge.
    Indices,
    /// Convolution parameters (strides and dilations sometimes 0, paddings sometimes huge).
    Conv,
    /// Pooling parameters (kernels and strides sometimes 0, paddings sometimes too large).
    Pool,
    /// File content: a mutated valid file (safetensors or IDX) or random bytes.
    Bytes,
    /// One of the program's scratch files (`file0` .. `file3`).
    File,
}

/// A drawn argument.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// Register `index` of `kind`.
    Reg(Kind, usize),
    /// A shape or a list of sizes.
    Dims(Vec<usize>),
    /// An axis.
    Axis(isize),
    /// Axes.
    Axes(Vec<isize>),
    /// A permutation.
    Perm(Vec<usize>),
    /// A size.
    Size(usize),
    /// A float.
    Float(f64),
    /// A dtype.
    DType(DType),
    /// A flag.
    Bool(bool),
    /// A seed.
    Seed(u64),
    /// Index values.
    Indices(Vec<i64>),
    /// Convolution parameters.
    Conv(Conv2dParams),
    /// Pooling parameters.
    Pool(Pool2dParams),
    /// File content, described by how it was made.
    Bytes(BytesRecipe),
    /// A scratch file.
    File(usize),
}

/// How the content of a file argument is made: from the seed, so it prints short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BytesRecipe {
    /// What the bytes start from.
    pub base: BytesBase,
    /// The seed of the mutations.
    pub seed: u64,
    /// How many bytes are changed, cut or appended.
    pub mutations: usize,
}

/// The starting point of a [`BytesRecipe`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BytesBase {
    /// A small valid IDX file of bytes, `gzip`ped or not.
    Idx {
        /// Whether the file is gzip-compressed.
        gzip: bool,
    },
    /// A small valid safetensors file.
    Safetensors,
    /// Random bytes.
    Random,
}

/// Huge sizes: past the memory of any machine, past the element limit, at the edges of `usize`.
const HUGE: [usize; 9] = [
    1 << 20,
    1 << 31,
    1 << 32,
    1 << 40,
    1 << 62,
    isize::MAX as usize,
    isize::MAX as usize + 1,
    usize::MAX - 1,
    usize::MAX,
];

/// A dimension: mostly small, sometimes empty, sometimes huge.
fn dim(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=9 => 0,
        10..=59 => rng.range(1, 4),
        60..=89 => rng.range(1, 8),
        90..=93 => rng.range(9, 40),
        _ => rng.pick(&HUGE),
    }
}

/// A rank: mostly 0 to 4, sometimes up to 8, rarely past the limit.
fn rank(rng: &mut Rng) -> usize {
    match rng.below(200) {
        0 => rng.pick(&[65, 100, 1000]),
        1..=20 => rng.range(5, 8),
        _ => rng.range(0, 4),
    }
}

/// A size argument (start, length, step, count): small, sometimes 0, sometimes huge.
fn size(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=14 => 0,
        15..=74 => rng.range(1, 4),
        75..=89 => rng.range(5, 20),
        _ => rng.pick(&HUGE),
    }
}

/// An axis: in range for small ranks most of the time.
fn axis(rng: &mut Rng) -> isize {
    match rng.below(100) {
        0..=69 => rng.range(0, 3) as isize,
        70..=89 => -(rng.range(1, 4) as isize),
        90..=95 => rng.range(4, 9) as isize,
        _ => rng.pick(&[isize::MIN, isize::MAX, -1000, 1000]),
    }
}

/// A float, often special.
fn float(rng: &mut Rng) -> f64 {
    match rng.below(100) {
        0..=49 => (rng.below(2001) as f64 - 1000.0) / 100.0,
        50..=69 => rng.range(0, 4) as f64,
        _ => rng.pick(&[
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            1e300,
            -1e300,
            1e-300,
            f64::MIN_POSITIVE,
            1e12,
            0.5,
        ]),
    }
}

impl ArgKind {
    /// Draws an argument of this kind; `counts` are the numbers of registers of each kind
    /// (`None` when a register is needed but none exists).
    pub fn draw(self, rng: &mut Rng, counts: impl Fn(Kind) -> usize) -> Option<Arg> {
        Some(match self {
            ArgKind::Reg(kind) => {
                let n = counts(kind);
                if n == 0 {
                    return None;
                }
                // Recent registers are likelier: programs then chain operations.
                let back = if rng.chance(60) {
                    rng.below(n.min(3))
                } else {
                    rng.below(n)
                };
                Arg::Reg(kind, n - 1 - back)
            }
            ArgKind::Dims => Arg::Dims((0..rank(rng)).map(|_| dim(rng)).collect()),
            ArgKind::SmallDims => {
                let r = rng.range(0, 4);
                let mut dims: Vec<usize> = (0..r).map(|_| rng.range(0, 4)).collect();
                // Keep at most 64 elements.
                while dims.iter().product::<usize>() > 64 {
                    dims.pop();
                }
                Arg::Dims(dims)
            }
            ArgKind::Axis => Arg::Axis(axis(rng)),
            ArgKind::Axes => Arg::Axes((0..rng.range(0, 3)).map(|_| axis(rng)).collect()),
            ArgKind::Perm => {
                let r = rng.range(0, 5);
                let mut p: Vec<usize> = (0..r).collect();
                for i in (1..r).rev() {
                    p.swap(i, rng.below(i + 1));
                }
                if rng.chance(20) && r > 0 {
                    p[rng.below(r)] = rng.range(0, 6);
                }
                Arg::Perm(p)
            }
            ArgKind::Size => Arg::Size(size(rng)),
            ArgKind::Float => Arg::Float(float(rng)),
            ArgKind::DType => Arg::DType(match rng.below(20) {
                0..=6 => DType::F32,
                7..=10 => DType::F64,
                11..=12 => DType::F16,
                13..=14 => DType::BF16,
                15..=17 => DType::I64,
                _ => DType::Bool,
            }),
            ArgKind::Bool => Arg::Bool(rng.chance(50)),
            ArgKind::Seed => Arg::Seed(match rng.below(4) {
                0 => u64::MAX - rng.below(8) as u64,
                _ => rng.below(1000) as u64,
            }),
            ArgKind::Indices => Arg::Indices(
                (0..size(rng).min(12))
                    .map(|_| match rng.below(100) {
                        0..=79 => rng.range(0, 5) as i64,
                        80..=89 => -(rng.range(1, 3) as i64),
                        _ => rng.pick(&[i64::MIN, i64::MAX, 1 << 40]),
                    })
                    .collect(),
            ),
            ArgKind::Conv => Arg::Conv(Conv2dParams {
                stride: (pair_part(rng, 1), pair_part(rng, 1)),
                padding: (pair_part(rng, 0), pair_part(rng, 0)),
                dilation: (pair_part(rng, 1), pair_part(rng, 1)),
            }),
            ArgKind::Pool => {
                let k = (pair_part(rng, 2), pair_part(rng, 2));
                Arg::Pool(Pool2dParams {
                    kernel: k,
                    stride: (pair_part(rng, k.0.min(3)), pair_part(rng, k.1.min(3))),
                    padding: (pair_part(rng, 0), pair_part(rng, 0)),
                })
            }
            ArgKind::Bytes => Arg::Bytes(BytesRecipe {
                base: match rng.below(5) {
                    0 | 1 => BytesBase::Idx {
                        gzip: rng.chance(50),
                    },
                    2 | 3 => BytesBase::Safetensors,
                    _ => BytesBase::Random,
                },
                seed: rng.next_u64(),
                mutations: match rng.below(3) {
                    0 => 0,
                    _ => rng.range(1, 4),
                },
            }),
            ArgKind::File => Arg::File(rng.below(4)),
        })
    }
}

/// One member of a (height, width) parameter pair: usually `usual`, sometimes 0..3, rarely
/// huge.
fn pair_part(rng: &mut Rng, usual: usize) -> usize {
    match rng.below(100) {
        0..=59 => usual,
        60..=94 => rng.range(0, 3),
        _ => rng.pick(&[1 << 20, 1 << 40, usize::MAX]),
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Reg(kind, i) => write!(f, "&{}{i}", kind.prefix()),
            Arg::Dims(d) if d.len() > 12 => {
                write!(
                    f,
                    "{}.. /* rank {} */",
                    dims(&d[..6]).trim_end_matches(']'),
                    d.len()
                )
            }
            Arg::Dims(d) => write!(f, "{}", dims(d)),
            Arg::Axis(a) => write!(f, "{a}"),
            Arg::Axes(a) => write!(f, "&{a:?}"),
            Arg::Perm(p) => write!(f, "&{p:?}"),
            Arg::Size(s) => write!(f, "{}", size_text(*s)),
            Arg::Float(x) => write!(f, "{}", float_text(*x)),
            Arg::DType(d) => write!(f, "DType::{d:?}"),
            Arg::Bool(b) => write!(f, "{b}"),
            Arg::Seed(s) => write!(f, "{s}"),
            Arg::Indices(v) => write!(f, "vec!{v:?}"),
            Arg::Conv(p) => write!(
                f,
                "Conv2dParams {{ stride: {}, padding: {}, dilation: {} }}",
                pair(p.stride),
                pair(p.padding),
                pair(p.dilation)
            ),
            Arg::Pool(p) => write!(
                f,
                "Pool2dParams {{ kernel: {}, stride: {}, padding: {} }}",
                pair(p.kernel),
                pair(p.stride),
                pair(p.padding)
            ),
            Arg::Bytes(r) => write!(
                f,
                "bytes({:?}, seed {}, {} mutations)",
                r.base, r.seed, r.mutations
            ),
            Arg::File(i) => write!(f, "file{i}"),
        }
    }
}

/// `[2, 1 << 40, usize::MAX]`.
fn dims(d: &[usize]) -> String {
    let parts: Vec<String> = d.iter().map(|&x| size_text(x)).collect();
    format!("[{}]", parts.join(", "))
}

/// A size as written in Rust: `3`, `1 << 40`, `usize::MAX`.
fn size_text(s: usize) -> String {
    match s {
        usize::MAX => "usize::MAX".into(),
        s if s == usize::MAX - 1 => "usize::MAX - 1".into(),
        s if s == isize::MAX as usize => "isize::MAX as usize".into(),
        s if s == isize::MAX as usize + 1 => "isize::MAX as usize + 1".into(),
        s if s >= 1 << 16 && s.is_power_of_two() => format!("1 << {}", s.trailing_zeros()),
        s => s.to_string(),
    }
}

/// A `(h, w)` pair with sizes written as in Rust.
fn pair((a, b): (usize, usize)) -> String {
    format!("({}, {})", size_text(a), size_text(b))
}

/// A float as written in Rust.
fn float_text(x: f64) -> String {
    if x.is_nan() {
        "f64::NAN".into()
    } else if x == f64::INFINITY {
        "f64::INFINITY".into()
    } else if x == f64::NEG_INFINITY {
        "f64::NEG_INFINITY".into()
    } else {
        format!("{x:?}")
    }
}
