//! [`Planted<B>`]: a backend that delegates to `B` but plants one realistic kernel bug.

use tessera_core::{
    ArgReduceOp, AssignMode, Backend, BackendStorage, BinaryOp, CmpOp, DType, Device, Distribution,
    HostData, Layout, ReduceOp, Result, UnaryOp,
};

/// The bug a [`Planted`] backend carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// None: a plain delegate.
    None,
    /// The binary op reads a broadcast operand (zero strides) by flat index modulo its
    /// un-broadcast size: right when only leading axes are broadcast (`[3] -> [2, 3]`), wrong
    /// otherwise (`[2, 1] -> [2, 3]`).
    WrongBroadcast(BinaryOp),
    /// `sum` over an axis that is not the last stops one element short on that axis.
    SumOffByOneOnOuterAxis,
    /// `matmul` reads an operand whose last two axes are transposed as if it were row-major.
    MatmulIgnoresTranspose,
    /// `max` reductions skip NaN instead of propagating it.
    MaxSwallowsNan,
}

/// `B` with one planted [`Bug`].
#[derive(Clone, Debug)]
pub struct Planted<B: Backend> {
    inner: B,
    bug: Bug,
}

impl<B: Backend> Planted<B> {
    /// `inner` with `bug`.
    pub fn new(inner: B, bug: Bug) -> Self {
        Planted { inner, bug }
    }

    /// The logical values of `layout` over `storage`.
    fn read(&self, storage: &B::Storage, layout: &Layout) -> Result<HostData> {
        self.inner.download(storage, layout)
    }

    /// The operand as the buggy kernel sees it: a broadcast operand's un-broadcast values
    /// repeated by flat index.
    fn misbroadcast(&self, storage: &B::Storage, layout: &Layout) -> Result<(B::Storage, Layout)> {
        let broadcast = layout
            .dims()
            .iter()
            .zip(layout.strides())
            .any(|(&d, &s)| s == 0 && d > 1);
        if !broadcast || layout.numel() == 0 {
            return Ok((
                self.inner.copy_strided(storage, layout)?,
                Layout::contiguous(layout.shape().clone()),
            ));
        }
        let source_dims: Vec<usize> = layout
            .dims()
            .iter()
            .zip(layout.strides())
            .map(|(&d, &s)| if s == 0 { 1 } else { d })
            .collect();
        let source_layout = Layout::strided(
            source_dims,
            layout.strides().to_vec(),
            layout.offset(),
            storage.len(),
        )?;
        let source = self.read(storage, &source_layout)?.to_f64_vec();
        let wrong: Vec<f64> = (0..layout.numel())
            .map(|i| source[i % source.len()])
            .collect();
        let data = match storage.dtype() {
            DType::F32 => HostData::F32(wrong.iter().map(|&v| v as f32).collect()),
            DType::F64 => HostData::F64(wrong),
            DType::I64 => HostData::I64(wrong.iter().map(|&v| v as i64).collect()),
            DType::Bool => HostData::Bool(wrong.iter().map(|&v| u8::from(v != 0.0)).collect()),
        };
        Ok((
            self.inner.upload(data)?,
            Layout::contiguous(layout.shape().clone()),
        ))
    }

    /// The layout as a kernel that ignores a transposed operand reads it: row-major from the
    /// same offset (when that stays inside the storage).
    fn ignore_transpose(&self, storage: &B::Storage, layout: &Layout) -> Layout {
        let (d, s) = (layout.dims(), layout.strides());
        let r = d.len();
        let transposed = r >= 2 && d[r - 1] > 1 && d[r - 2] > 1 && s[r - 2] < s[r - 1];
        if !transposed {
            return layout.clone();
        }
        let row_major = layout.shape().contiguous_strides();
        Layout::strided(
            layout.shape().clone(),
            row_major,
            layout.offset(),
            storage.len(),
        )
        .unwrap_or_else(|_| layout.clone())
    }
}

impl<B: Backend> Backend for Planted<B> {
    type Storage = B::Storage;

    fn name(&self) -> &'static str {
        "planted"
    }
    fn device(&self) -> Device {
        self.inner.device()
    }
    fn supports_dtype(&self, dtype: DType) -> bool {
        self.inner.supports_dtype(dtype)
    }
    fn upload(&self, data: HostData) -> Result<B::Storage> {
        self.inner.upload(data)
    }
    fn download(&self, s: &B::Storage, l: &Layout) -> Result<HostData> {
        self.inner.download(s, l)
    }
    fn full(&self, n: usize, dtype: DType, value: f64) -> Result<B::Storage> {
        self.inner.full(n, dtype, value)
    }
    fn copy_strided(&self, s: &B::Storage, l: &Layout) -> Result<B::Storage> {
        self.inner.copy_strided(s, l)
    }
    fn assign(
        &self,
        d: &mut B::Storage,
        dl: &Layout,
        s: &B::Storage,
        sl: &Layout,
        m: AssignMode,
    ) -> Result<()> {
        self.inner.assign(d, dl, s, sl, m)
    }
    fn cast(&self, s: &B::Storage, l: &Layout, dtype: DType) -> Result<B::Storage> {
        self.inner.cast(s, l, dtype)
    }
    fn unary(&self, op: UnaryOp, x: &B::Storage, l: &Layout) -> Result<B::Storage> {
        self.inner.unary(op, x, l)
    }
    fn binary(
        &self,
        op: BinaryOp,
        a: &B::Storage,
        al: &Layout,
        b: &B::Storage,
        bl: &Layout,
    ) -> Result<B::Storage> {
        if self.bug == Bug::WrongBroadcast(op) {
            let (a, al) = self.misbroadcast(a, al)?;
            let (b, bl) = self.misbroadcast(b, bl)?;
            return self.inner.binary(op, &a, &al, &b, &bl);
        }
        self.inner.binary(op, a, al, b, bl)
    }
    fn compare(
        &self,
        op: CmpOp,
        a: &B::Storage,
        al: &Layout,
        b: &B::Storage,
        bl: &Layout,
    ) -> Result<B::Storage> {
        self.inner.compare(op, a, al, b, bl)
    }
    fn where_select(
        &self,
        c: &B::Storage,
        cl: &Layout,
        t: &B::Storage,
        tl: &Layout,
        f: &B::Storage,
        fl: &Layout,
    ) -> Result<B::Storage> {
        self.inner.where_select(c, cl, t, tl, f, fl)
    }
    fn reduce(
        &self,
        op: ReduceOp,
        x: &B::Storage,
        l: &Layout,
        axes: &[usize],
    ) -> Result<B::Storage> {
        match (self.bug, op) {
            (Bug::SumOffByOneOnOuterAxis, ReduceOp::Sum) => {
                let mut short = l.clone();
                for &a in axes.iter().filter(|&&a| a + 1 < l.rank()) {
                    let len = l.dims()[a];
                    short = short.narrow(a as isize, 0, len.saturating_sub(1))?;
                }
                self.inner.reduce(op, x, &short, axes)
            }
            (Bug::MaxSwallowsNan, ReduceOp::Max) if x.dtype().is_float() => {
                let values: Vec<f64> = self
                    .read(x, l)?
                    .to_f64_vec()
                    .into_iter()
                    .map(|v| if v.is_nan() { f64::NEG_INFINITY } else { v })
                    .collect();
                let data = match x.dtype() {
                    DType::F32 => HostData::F32(values.iter().map(|&v| v as f32).collect()),
                    _ => HostData::F64(values),
                };
                let clean = self.inner.upload(data)?;
                self.inner
                    .reduce(op, &clean, &Layout::contiguous(l.shape().clone()), axes)
            }
            _ => self.inner.reduce(op, x, l, axes),
        }
    }
    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: &B::Storage,
        l: &Layout,
        axis: usize,
    ) -> Result<B::Storage> {
        self.inner.arg_reduce(op, x, l, axis)
    }
    fn matmul(
        &self,
        a: &B::Storage,
        al: &Layout,
        b: &B::Storage,
        bl: &Layout,
    ) -> Result<B::Storage> {
        if self.bug == Bug::MatmulIgnoresTranspose {
            let (al, bl) = (self.ignore_transpose(a, al), self.ignore_transpose(b, bl));
            return self.inner.matmul(a, &al, b, &bl);
        }
        self.inner.matmul(a, al, b, bl)
    }
    fn index_select(
        &self,
        x: &B::Storage,
        l: &Layout,
        axis: usize,
        i: &B::Storage,
        il: &Layout,
    ) -> Result<B::Storage> {
        self.inner.index_select(x, l, axis, i, il)
    }
    fn gather(
        &self,
        x: &B::Storage,
        l: &Layout,
        axis: usize,
        i: &B::Storage,
        il: &Layout,
    ) -> Result<B::Storage> {
        self.inner.gather(x, l, axis, i, il)
    }
    fn scatter_add(
        &self,
        base: &B::Storage,
        bl: &Layout,
        axis: usize,
        i: &B::Storage,
        il: &Layout,
        src: &B::Storage,
        sl: &Layout,
    ) -> Result<B::Storage> {
        self.inner.scatter_add(base, bl, axis, i, il, src, sl)
    }
    fn random(
        &self,
        dist: Distribution,
        n: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<B::Storage> {
        self.inner.random(dist, n, dtype, seed, offset)
    }
}
