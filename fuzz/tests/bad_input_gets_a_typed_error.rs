//! Bad input to public calls gets a typed error (or the right result), never undefined
//! behaviour, a panic or an abort, on the CPU and example backends: convolution gradients with
//! mismatched channel counts (the CPU GEMM once read past the weight), the validation of the
//! gradient entry points, checked size arithmetic, allocations that cannot be met
//! (`Error::OutOfMemory`), `BatchNorm` without features, streamed gzip IDX files, atomic saves,
//! the checkpoint loader, the example backend's indices and counters, and attention outputs too
//! large to allocate. These are the reproducers of tracker issue 11, as regression tests.
//!
//! This test binary limits its own address space to 4 GiB first, so the requests that cannot
//! be met fail the same way on every machine (whatever its memory or overcommit policy) and an
//! abort would kill the test instead of swapping the machine. CI runs it in the test profile
//! (with overflow checks); `cargo xtask fuzz` runs it in release (without), and both must pass:
//! no check relies on overflow checks or debug assertions.

use std::sync::Once;
use tessera_autograd::Var;
use tessera_backend_example::ExampleBackend;
use tessera_core::{Backend, Conv2dParams, DType, Error, Generator, Pool2dParams, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{BatchNormConfig, Conv2dConfig, EmbeddingConfig, LinearConfig};

static LIMIT: Once = Once::new();

/// Limits this process to 4 GiB of address space (once).
fn limit_memory() {
    LIMIT.call_once(|| fuzz::child::limit_memory(4096).expect("setrlimit"));
}

fn ones<B: Backend>(dims: &[usize], dev: &B) -> Tensor<B> {
    Tensor::ones(dims.to_vec(), DType::F32, dev).expect("small tensor")
}

fn is_size_overflow<T>(r: tessera_core::Result<T>) -> bool {
    matches!(r, Err(Error::SizeOverflow { .. }))
}

fn is_oom<T>(r: tessera_core::Result<T>, bytes: usize) -> bool {
    matches!(r, Err(Error::OutOfMemory { requested_bytes, .. }) if requested_bytes >= bytes)
}

// ----- 1. undefined behaviour from safe code: the conv GEMM read the weight past its end -----

fn conv_channels_are_checked<B: Backend>(dev: &B) {
    let g = ones(&[1, 1, 1, 1], dev);
    let p = Conv2dParams::default();
    // The reproducer: input dims with 2 channels, a weight with 1. It returned Ok([1.0, 0.0]),
    // the 0.0 read past the end of the weight.
    let w = ones(&[1, 1, 1, 1], dev);
    let err = g.conv2d_backward_input(&w, &[1, 2, 1, 1], p).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(err.to_string().contains("channels"), "{err}");
    // The same through the backend method, which is public too.
    assert!(dev.conv2d_backward_input(&g, &w, &[1, 2, 1, 1], p).is_err());
    // An empty weight [1, 0, 1, 1] segfaulted.
    let empty = Tensor::ones([1, 0, 1, 1], DType::F32, dev).unwrap();
    assert!(g.conv2d_backward_input(&empty, &[1, 1, 1, 1], p).is_err());
    assert!(g.conv2d_backward_input(&empty, &[1, 2, 1, 1], p).is_err());
    assert!(dev
        .conv2d_backward_input(&g, &empty, &[1, 2, 1, 1], p)
        .is_err());
    // With consistent channels (none at all) it is a correct, empty gradient.
    let gx = g.conv2d_backward_input(&empty, &[1, 0, 1, 1], p).unwrap();
    assert_eq!(gx.dims(), &[1, 0, 1, 1]);
    let gx = g.conv2d_backward_input(&w, &[1, 1, 1, 1], p).unwrap();
    assert_eq!(gx.to_vec::<f32>().unwrap(), vec![1.0]);
}

#[test]
fn conv_gradient_channel_counts_are_checked() {
    limit_memory();
    conv_channels_are_checked(&Cpu::new());
    conv_channels_are_checked(&ExampleBackend::new());
}

// ----- 2. the public gradient entry points validate everything -----

fn gradient_entry_points_validate<B: Backend>(dev: &B) {
    let p = Conv2dParams::default();
    let x = ones(&[1, 1, 3, 3], dev);
    let w = ones(&[1, 1, 2, 2], dev);
    let y = x.conv2d(&w, None, p).unwrap(); // [1, 1, 2, 2]
    let stride0 = Conv2dParams {
        stride: (0, 1),
        ..p
    };
    let dilation0 = Conv2dParams {
        dilation: (1, 0),
        ..p
    };
    for (dims, params) in [
        (&[1, 1][..], p),               // rank < 4
        (&[1, 1, 3, 3, 1][..], p),      // rank 5
        (&[1, 1, 3, 3][..], stride0),   // stride 0
        (&[1, 1, 3, 3][..], dilation0), // dilation 0
        (&[1, 1, 4, 4][..], p),         // grad_out is not this input's output shape
        (&[2, 1, 3, 3][..], p),         // batch differs
    ] {
        assert!(
            y.conv2d_backward_input(&w, dims, params).is_err(),
            "{dims:?} {params:?}"
        );
        assert!(dev.conv2d_backward_input(&y, &w, dims, params).is_err());
    }
    for (dims, params) in [
        (&[1, 1][..], p),
        (&[1, 1, 2, 2, 1][..], p),
        (&[1, 1, 2, 2][..], stride0),
        (&[1, 2, 2, 2][..], p), // channels differ from x
        (&[2, 1, 2, 2][..], p), // out channels differ from grad_out
        (&[1, 1, 1, 1][..], p), // grad_out is not the output shape
    ] {
        assert!(
            y.conv2d_backward_weight(&x, dims, params).is_err(),
            "{dims:?}"
        );
        assert!(dev.conv2d_backward_weight(&x, &y, dims, params).is_err());
    }
    // grad_out of rank 3.
    let flat = ones(&[1, 2, 2], dev);
    assert!(flat.conv2d_backward_input(&w, &[1, 1, 3, 3], p).is_err());
    assert!(flat.conv2d_backward_weight(&x, &[1, 1, 2, 2], p).is_err());
    // The consistent calls work.
    assert_eq!(
        y.conv2d_backward_input(&w, x.dims(), p).unwrap().dims(),
        x.dims()
    );
    assert_eq!(
        y.conv2d_backward_weight(&x, w.dims(), p).unwrap().dims(),
        w.dims()
    );

    let pool = Pool2dParams::square(2);
    let x = ones(&[1, 1, 4, 4], dev);
    let (y, at) = x.max_pool2d_with_indices(pool).unwrap(); // [1, 1, 2, 2]
    let zero_stride = Pool2dParams {
        stride: (0, 2),
        ..pool
    };
    let zero_kernel = Pool2dParams {
        kernel: (0, 2),
        ..pool
    };
    for (dims, params) in [
        (&[1, 4][..], pool),
        (&[1, 1, 4, 4, 1][..], pool),
        (&[1, 1, 4, 4][..], zero_stride),
        (&[1, 1, 4, 4][..], zero_kernel),
        (&[1, 1, 8, 8][..], pool), // its output would be [1, 1, 4, 4]
        (&[1, 2, 4, 4][..], pool),
    ] {
        assert!(
            y.max_pool2d_backward(&at, dims, params).is_err(),
            "{dims:?}"
        );
        assert!(dev.max_pool2d_backward(&y, &at, dims, params).is_err());
        assert!(y.avg_pool2d_backward(dims, params).is_err(), "{dims:?}");
        assert!(dev.avg_pool2d_backward(&y, dims, params).is_err());
    }
    // Window positions outside the 2x2 window (0..4).
    for bad in [4i64, 7, -1, i64::MAX, i64::MIN] {
        let at = Tensor::from_vec(vec![0, 1, bad, 3], [1, 1, 2, 2], dev).unwrap();
        let err = y.max_pool2d_backward(&at, x.dims(), pool).unwrap_err();
        assert!(
            matches!(err, Error::IndexOutOfRange { .. }),
            "{bad}: {err:?}"
        );
        assert!(dev.max_pool2d_backward(&y, &at, x.dims(), pool).is_err());
    }
    // Positions of another shape or dtype.
    let short = Tensor::from_vec(vec![0i64, 1], [1, 1, 1, 2], dev).unwrap();
    assert!(y.max_pool2d_backward(&short, x.dims(), pool).is_err());
    assert!(y.max_pool2d_backward(&y, x.dims(), pool).is_err());
    assert_eq!(
        y.max_pool2d_backward(&at, x.dims(), pool).unwrap().dims(),
        x.dims()
    );
    assert_eq!(
        y.avg_pool2d_backward(x.dims(), pool).unwrap().dims(),
        x.dims()
    );
}

#[test]
fn gradient_entry_points_validate_their_arguments() {
    limit_memory();
    gradient_entry_points_validate(&Cpu::new());
    gradient_entry_points_validate(&ExampleBackend::new());
}

// ----- 3. unchecked size arithmetic -----

fn sizes_are_checked<B: Backend>(dev: &B) {
    // Debug panicked; release returned Ok with 0 elements.
    assert!(is_size_overflow(Tensor::zeros(
        [1 << 40, 1 << 40],
        DType::F32,
        dev
    )));
    // Release: Ok, and sum_all() gave 0.
    assert!(is_size_overflow(Tensor::zeros(
        [1 << 32, 1 << 32],
        DType::F32,
        dev
    )));
    // Accepted before.
    let t = ones(&[2, 1, 3], dev);
    assert!(is_size_overflow(t.broadcast_to([2, 1 << 62, 3])));
    // Looped 2^64 times.
    assert!(is_size_overflow(Tensor::eye(usize::MAX, DType::F32, dev)));
    // An empty tensor with a huge dim got negative strides.
    assert!(is_size_overflow(Tensor::zeros(
        [0, 1 << 62, 4],
        DType::F32,
        dev
    )));
    // narrow's end and slice's step.
    assert!(t.narrow(0, usize::MAX, 2).is_err());
    assert_eq!(t.slice(2, 0, 3, usize::MAX).unwrap().dims(), &[2, 1, 1]);
    assert!(t.slice(2, 0, 3, 0).is_err());
    // Window sizes.
    let x = ones(&[1, 1, 2, 2], dev);
    let huge_window = Pool2dParams {
        kernel: (usize::MAX, 1),
        stride: (1, 1),
        padding: (usize::MAX / 2, 0),
    };
    assert!(x.max_pool2d(huge_window).is_err());
    let huge_padding = Conv2dParams {
        padding: (usize::MAX, 0),
        ..Conv2dParams::default()
    };
    assert!(x
        .conv2d(&ones(&[1, 1, 1, 1], dev), None, huge_padding)
        .is_err());
    // Matmul sizes: [2^40, 1] x [1, 2^40] of broadcast views.
    let col = ones(&[1, 1], dev).broadcast_to([1 << 40, 1]).unwrap();
    let row = ones(&[1, 1], dev).broadcast_to([1, 1 << 40]).unwrap();
    assert!(is_size_overflow(col.matmul(&row)));
    // arange/linspace counts.
    assert!(is_size_overflow(Tensor::arange(
        -1e300,
        1e300,
        1e-300,
        DType::F32,
        dev
    )));
    assert!(is_size_overflow(Tensor::linspace(
        0.0,
        1.0,
        usize::MAX,
        DType::F32,
        dev
    )));
    // Reshapes and views to absurd shapes.
    assert!(t.reshape([1 << 40, 1 << 40]).is_err());
    assert!(t.reshape(vec![1; 65]).is_err());
    assert!(t.as_strided([2], vec![isize::MAX], 0).is_err());
}

#[test]
fn size_arithmetic_is_checked() {
    limit_memory();
    sizes_are_checked(&Cpu::new());
    sizes_are_checked(&ExampleBackend::new());
    // Fan-in of absurd layers (the product overflowed).
    let mut g = Generator::new(0);
    let dev = Cpu::new();
    assert!(is_size_overflow(
        LinearConfig::new(1 << 40, 1 << 40).init(&dev, &mut g)
    ));
    let config = Conv2dConfig::new(4, 1, (2, usize::MAX - 1));
    assert!(is_size_overflow(config.init(&dev, &mut g)));
}

// ----- 4. allocation failure killed the process -----

fn allocation_failures_are_errors<B: Backend>(dev: &B) {
    assert!(is_oom(Tensor::zeros([1 << 40], DType::F32, dev), 4 << 40));
    assert!(is_oom(
        Tensor::randn([1 << 40], DType::F32, 0, dev),
        4 << 40
    ));
    assert!(is_oom(Tensor::eye(1 << 20, DType::F32, dev), 4 << 40));
    assert!(is_oom(
        Tensor::arange(0.0, 1e12, 1.0, DType::F32, dev),
        4_000_000_000_000
    ));
    assert!(is_oom(
        Tensor::linspace(0.0, 1.0, 1 << 40, DType::F64, dev),
        8 << 40
    ));
    // A broadcast view is fine; materialising it is not.
    let view = ones(&[1], dev).broadcast_to([1 << 40]).unwrap();
    assert!(is_oom(view.contiguous(), 4 << 40));
    assert!(is_oom(view.exp(), 4 << 40));
    assert!(view.to_vec_f64().is_err());
}

#[test]
fn allocation_failures_are_out_of_memory_errors() {
    limit_memory();
    allocation_failures_are_errors(&Cpu::new());
    allocation_failures_are_errors(&ExampleBackend::new());
    let dev = Cpu::new();
    let mut g = Generator::new(0);
    let big = 1 << 20;
    assert!(is_oom(
        LinearConfig::new(big, big).init(&dev, &mut g),
        4 << 40
    ));
    assert!(is_oom(
        EmbeddingConfig::new(big, big).init(&dev, &mut g),
        4 << 40
    ));
    let config = Conv2dConfig::new(1 << 10, 1 << 10, (1 << 10, 1 << 10));
    assert!(is_oom(config.init(&dev, &mut g), 4 << 40));
    assert!(is_oom(BatchNormConfig::new(1 << 40).init_1d(&dev), 4 << 40));
    assert!(is_oom(
        BatchNormConfig::new(1 << 40)
            .dtype(DType::F64)
            .init_2d(&dev),
        8 << 40
    ));
    // Direct backend requests.
    assert!(dev.full(1 << 40, DType::F32, 0.0).is_err());
    assert!(ExampleBackend::new()
        .full(1 << 40, DType::F32, 0.0)
        .is_err());
}

// ----- 5. smaller: BatchNorm with 0 features, the gzip IDX reader, atomic saves, loading -----

#[test]
fn batch_norm_without_features_is_an_error() {
    limit_memory();
    let dev = Cpu::new();
    assert!(BatchNormConfig::new(0).init_1d(&dev).is_err());
    assert!(BatchNormConfig::new(0).init_2d(&dev).is_err());
}

#[test]
fn gzip_idx_is_streamed_against_its_header() {
    use std::io::Write;
    limit_memory();
    // 16 declared bytes, then 3 GiB of zeros in 3 MB of gzip members: inflating it whole
    // (what the reader did) needs 3 GiB and aborts under this 4 GiB limit; streamed, it is an
    // error about trailing bytes after reading at most 64 MiB.
    let gzip = |bytes: &[u8]| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    };
    let mut file = gzip(&tessera_nn::data::idx::encode_idx(&[16], &[1; 16]).unwrap());
    file.extend(gzip(&vec![0u8; 1 << 20]).repeat(3 << 10));
    assert!(file.len() < 4 << 20, "{} bytes", file.len());
    let dir = tempfile_dir();
    let path = dir.join("bomb-idx1-ubyte.gz");
    std::fs::write(&path, &file).unwrap();
    let err = tessera_nn::data::read_idx(&path).unwrap_err();
    assert!(err.to_string().contains("trailing"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh scratch folder.
fn tempfile_dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tessera-issue-11-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn atomic_saves_leave_no_temporaries() {
    limit_memory();
    let dev = Cpu::new();
    let dir = tempfile_dir();
    let target = dir.join("model.safetensors");
    // What a save killed mid-write leaves: a temporary of a writer that no longer runs.
    let stale = dir.join(format!(".model.safetensors.tmp-{}-0", u32::MAX - 7));
    std::fs::write(&stale, vec![0u8; 1 << 16]).unwrap();
    let t = ones(&[2], &dev);
    tessera_nn::checkpoint::save(&target, [("t", &t)], &Default::default()).unwrap();
    assert!(!stale.exists(), "the next save removes the stale temporary");
    // A save that fails (the target is a non-empty folder) removes its own temporary.
    let busy = dir.join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("inside"), b"x").unwrap();
    assert!(tessera_nn::checkpoint::save(&busy, [("t", &t)], &Default::default()).is_err());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn checkpoint_loader_rejects_what_save_never_writes() {
    limit_memory();
    let dev = Cpu::new();
    let dir = tempfile_dir();
    let file = |name: &str, header: String| {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0; 4]);
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let entry = r#"{"dtype":"F32","shape":[1],"data_offsets":[0,4]}"#;
    let ones = vec!["1"; 100_000].join(",");
    for path in [
        file("duplicate", format!(r#"{{"a":{entry},"a":{entry}}}"#)),
        file("empty-name", format!(r#"{{"":{entry}}}"#)),
        file(
            "rank-100000",
            format!(r#"{{"a":{{"dtype":"F32","shape":[{ones}],"data_offsets":[0,4]}}}}"#),
        ),
    ] {
        let err = tessera_nn::checkpoint::load(&path, &dev).unwrap_err();
        assert!(
            matches!(err, tessera_nn::Error::Format { .. }),
            "{}: {err:?}",
            path.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ----- 6. the example backend -----

#[test]
fn example_backend_indices_and_counters_are_checked() {
    limit_memory();
    let dev = ExampleBackend::new();
    // A negative index, accepted when the output was empty.
    let x = Tensor::zeros([0, 3], DType::F32, &dev).unwrap();
    let neg = Tensor::from_vec(vec![-1i64], [1], &dev).unwrap();
    assert!(matches!(
        x.index_select(1, &neg),
        Err(Error::IndexOutOfRange { .. })
    ));
    // An index into an axis of size 0.
    let x = Tensor::zeros([0, 0], DType::F32, &dev).unwrap();
    let zero = Tensor::from_vec(vec![0i64], [1], &dev).unwrap();
    assert!(matches!(
        x.index_select(1, &zero),
        Err(Error::IndexOutOfRange { .. })
    ));
    // An offset near u64::MAX panicked in the memory code.
    let r = Tensor::random(
        [4],
        tessera_core::Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        },
        DType::F32,
        3,
        u64::MAX - 1,
        &dev,
    )
    .unwrap();
    assert_eq!(r.numel(), 4);
    // Same numbers as the CPU backend, wrap included.
    let c = Tensor::random(
        [4],
        tessera_core::Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        },
        DType::F32,
        3,
        u64::MAX - 1,
        &Cpu::new(),
    )
    .unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), c.to_vec::<f32>().unwrap());
    // Through autograd too: the reproducer's operations never panic.
    let v = Var::param(ones(&[2, 2], &Cpu::new()));
    assert!(v.narrow(0, usize::MAX - 1, 2).is_err());
}

// ----- attention (issue 14's API, held to the same promise) -----

#[test]
fn attention_outputs_that_cannot_be_allocated_are_out_of_memory_errors() {
    limit_memory();
    use tessera_core::AttentionOptions;
    let dev = Cpu::new();
    // q, k, v [2^20, 2^10, 1] as broadcast views of one element: the output and its
    // log-sum-exp (4 GiB and more) cannot fit in the 4 GiB this process may use.
    let q = ones(&[1, 1, 1], &dev)
        .broadcast_to([1 << 20, 1 << 10, 1])
        .unwrap();
    let options = AttentionOptions::new();
    let r = q.scaled_dot_product_attention(&q, &q, &options);
    assert!(is_oom(r, 4 << 30), "forward");
    let small = ones(&[2, 3, 4], &dev);
    let forward = small
        .scaled_dot_product_attention_with_lse(&small, &small, &options)
        .unwrap();
    assert_eq!(forward.out.dims(), &[2, 3, 4]);
}
