//! Unit tests of the graph machinery: accumulation, freeing, no_grad, detach, deep graphs,
//! requires_grad propagation, leaf updates, gradient-ready hooks, and closed-form gradients.

use std::sync::{Arc, Mutex};
use tessera_autograd::{is_grad_enabled, no_grad, GradReadyHook, Var};
use tessera_core::{DType, Error, Tensor};
use tessera_cpu::Cpu;

fn dev() -> Cpu {
    Cpu::new()
}

fn t(values: &[f64], dims: &[usize]) -> Tensor<Cpu> {
    Tensor::from_vec(values.to_vec(), dims, &dev()).unwrap()
}

fn grad_of(v: &Var<Cpu>) -> Vec<f64> {
    v.grad().expect("a gradient").to_vec::<f64>().unwrap()
}

fn assert_close(actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len(), "{actual:?} vs {expected:?}");
    for (a, e) in actual.iter().zip(expected) {
        assert!(
            (a - e).abs() <= 1e-9 * (1.0 + e.abs()),
            "{actual:?} vs {expected:?}"
        );
    }
}

#[test]
fn var_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Var<Cpu>>();
}

#[test]
fn a_var_used_twice_gets_both_contributions() {
    let x = Var::param(t(&[1.0, -2.0, 3.0], &[3]));
    x.mul(&x).unwrap().sum_all().unwrap().backward().unwrap();
    assert_close(&grad_of(&x), &[2.0, -4.0, 6.0]);
}

#[test]
fn diamond_graphs_sum_the_branches() {
    // y = (2x) * (3x) = 6x^2, dy/dx = 12x.
    let x = Var::param(t(&[0.5, -1.0], &[2]));
    let a = x.mul_scalar(2.0).unwrap();
    let b = x.mul_scalar(3.0).unwrap();
    a.mul(&b).unwrap().sum_all().unwrap().backward().unwrap();
    assert_close(&grad_of(&x), &[6.0, -12.0]);
}

#[test]
fn gradients_accumulate_over_backward_calls_until_zeroed() {
    let x = Var::param(t(&[1.0, 2.0], &[2]));
    for _ in 0..2 {
        x.mul_scalar(3.0)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
    }
    assert_close(&grad_of(&x), &[6.0, 6.0]);
    x.zero_grad();
    assert!(x.grad().is_none());
    x.mul_scalar(3.0)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_close(&grad_of(&x), &[3.0, 3.0]);
}

#[test]
fn set_grad_is_the_starting_point_of_accumulation() {
    let x = Var::param(t(&[1.0, 2.0], &[2]));
    x.set_grad(Some(t(&[10.0, 20.0], &[2])));
    x.sum_all().unwrap().backward().unwrap();
    assert_close(&grad_of(&x), &[11.0, 21.0]);
    x.set_grad(Some(t(&[1.0, 2.0, 3.0], &[3])));
    let err = x.sum_all().unwrap().backward().unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
}

#[test]
fn clones_are_the_same_node() {
    let x = Var::param(t(&[4.0], &[1]));
    let alias = x.clone();
    alias
        .square()
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_close(&grad_of(&x), &[8.0]);
    assert_eq!(x.id(), alias.id());
}

#[test]
fn a_second_backward_through_a_freed_graph_is_an_error() {
    let x = Var::param(t(&[1.0, 2.0], &[2]));
    let y = x.exp().unwrap().sum_all().unwrap();
    y.backward().unwrap();
    let first = grad_of(&x);
    let err = y.backward().unwrap_err();
    assert!(err.to_string().contains("already freed"), "{err}");
    // The failed call changed nothing.
    assert_eq!(grad_of(&x), first);
}

#[test]
fn backward_retain_allows_a_second_backward() {
    let x = Var::param(t(&[1.0, 2.0], &[2]));
    let y = x.exp().unwrap().sum_all().unwrap();
    y.backward_retain().unwrap();
    y.backward_retain().unwrap();
    let e: Vec<f64> = [1.0f64, 2.0].iter().map(|v| 2.0 * v.exp()).collect();
    assert_close(&grad_of(&x), &e);
    // A plain backward still works once more, then the graph is gone.
    y.backward().unwrap();
    assert!(y.backward().is_err());
}

#[test]
fn backward_frees_the_saved_tensors() {
    let saved = t(&[1.0, 2.0], &[2]);
    let base = Arc::strong_count(saved.storage_arc());
    let x = Var::param(t(&[3.0, 4.0], &[2]));
    let c = Var::constant(saved.clone());
    let y = x.mul(&c).unwrap().sum_all().unwrap();
    drop(c);
    // The graph keeps the constant's value alive (as a parent and in the mul closure).
    assert!(Arc::strong_count(saved.storage_arc()) > base);
    y.backward().unwrap();
    assert_eq!(Arc::strong_count(saved.storage_arc()), base);
    assert_close(&grad_of(&x), &[1.0, 2.0]);
}

#[test]
fn no_grad_records_nothing() {
    let x = Var::param(t(&[1.0, 2.0], &[2]));
    let y = no_grad(|| {
        assert!(!is_grad_enabled());
        x.mul_scalar(2.0).unwrap().exp().unwrap().sum_all().unwrap()
    });
    assert!(is_grad_enabled());
    assert!(!y.requires_grad());
    assert!(y.is_leaf());
    assert_close(
        &y.value().to_vec::<f64>().unwrap(),
        &[2f64.exp() + 4f64.exp()],
    );
    assert!(matches!(y.backward(), Err(Error::InvalidArgument { .. })));
    assert!(x.grad().is_none());
}

#[test]
fn detach_stops_gradients() {
    let x = Var::param(t(&[1.5, -2.0], &[2]));
    let d = x.detach();
    assert!(!d.requires_grad());
    assert_eq!(d.value().to_vec::<f64>().unwrap(), vec![1.5, -2.0]);
    // d(x * detach(x))/dx = detach(x) = x, not 2x.
    x.mul(&d).unwrap().sum_all().unwrap().backward().unwrap();
    assert_close(&grad_of(&x), &[1.5, -2.0]);
    assert!(d.grad().is_none());
}

#[test]
fn requires_grad_propagates_from_leaves() {
    let p = Var::param(t(&[1.0], &[1]));
    let c = Var::constant(t(&[2.0], &[1]));
    let l = Var::leaf(t(&[3.0], &[1]), false);
    assert!(p.requires_grad() && !c.requires_grad() && !l.requires_grad());
    let cc = c.add(&l).unwrap();
    assert!(!cc.requires_grad());
    assert!(cc.is_leaf(), "an op on constants records no node");
    let pc = p.mul(&cc).unwrap();
    assert!(pc.requires_grad() && !pc.is_leaf());
    pc.sum_all().unwrap().backward().unwrap();
    assert_close(&grad_of(&p), &[5.0]);
    assert!(c.grad().is_none() && l.grad().is_none());
}

#[test]
fn only_float_leaves_can_require_grad() {
    let i = Var::param(Tensor::from_vec(vec![1i64, 2], [2], &dev()).unwrap());
    assert!(!i.requires_grad());
    let f = Var::param(Tensor::ones([2], DType::F32, &dev()).unwrap());
    assert!(f.requires_grad());
}

#[test]
fn a_deep_chain_of_ten_thousand_ops_backpropagates_and_drops() {
    let x = Var::param(t(&[1.0], &[1]));
    let mut y = x.clone();
    for _ in 0..10_000 {
        y = y.mul_scalar(1.0001).unwrap();
    }
    y.sum_all().unwrap().backward_retain().unwrap();
    assert_close(&grad_of(&x), &[1.0001f64.powi(10_000)]);
    // Dropping the retained chain must not recurse once per level either.
    drop(y);
    let mut z = x.clone();
    for _ in 0..50_000 {
        z = z.add_scalar(1.0).unwrap();
    }
    drop(z);
}

#[test]
fn set_value_replaces_a_leaf_and_checks_shape_dtype_and_kind() {
    let w = Var::param(t(&[1.0, 2.0], &[2]));
    let y = w.mul_scalar(2.0).unwrap();
    w.set_value(t(&[5.0, 6.0], &[2])).unwrap();
    assert_eq!(w.value().to_vec::<f64>().unwrap(), vec![5.0, 6.0]);
    // The graph recorded before keeps the value it saw.
    assert_eq!(y.value().to_vec::<f64>().unwrap(), vec![2.0, 4.0]);
    assert!(matches!(
        w.set_value(t(&[1.0, 2.0, 3.0], &[3])),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        w.set_value(Tensor::ones([2], DType::F32, &dev()).unwrap()),
        Err(Error::DTypeMismatch { .. })
    ));
    assert!(matches!(
        y.set_value(t(&[0.0, 0.0], &[2])),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn backward_needs_one_element_and_backward_with_checks_the_seed() {
    let x = Var::param(t(&[1.0, 2.0], &[2]));
    let y = x.square().unwrap();
    assert!(y
        .backward()
        .unwrap_err()
        .to_string()
        .contains("one-element"));
    assert!(matches!(
        y.backward_with(&t(&[1.0], &[1])),
        Err(Error::ShapeMismatch { .. })
    ));
    y.backward_with(&t(&[1.0, 10.0], &[2])).unwrap();
    assert_close(&grad_of(&x), &[2.0, 40.0]);
}

#[test]
fn piecewise_constant_ops_give_zero_gradients() {
    let x = Var::param(t(&[0.5, -1.5, 2.25], &[3]));
    let y = x
        .floor()
        .unwrap()
        .add(&x.ceil().unwrap())
        .unwrap()
        .add(&x.sign().unwrap())
        .unwrap();
    y.sum_all().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![0.0, 0.0, 0.0]);
}

#[test]
fn ties_split_the_gradient_evenly() {
    let x = Var::param(t(&[1.0, 3.0, 3.0, 2.0], &[4]));
    x.max(&[], false).unwrap().backward().unwrap();
    assert_close(&grad_of(&x), &[0.0, 0.5, 0.5, 0.0]);
    let a = Var::param(t(&[1.0, 2.0], &[2]));
    let b = Var::param(t(&[1.0, 0.0], &[2]));
    a.maximum(&b)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_close(&grad_of(&a), &[0.5, 1.0]);
    assert_close(&grad_of(&b), &[0.5, 0.0]);
}

#[test]
fn kinks_follow_pytorch() {
    let x = Var::param(t(&[0.0, 0.0, 0.0, 1.0], &[4]));
    let y = x.relu().unwrap().add(&x.abs().unwrap()).unwrap();
    y.sum_all().unwrap().backward().unwrap();
    assert_close(&grad_of(&x), &[0.0, 0.0, 0.0, 2.0]);
    let c = Var::param(t(&[-1.0, -0.5, 0.5, 1.0], &[4]));
    c.clamp(-0.5, 0.5)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_close(&grad_of(&c), &[0.0, 1.0, 1.0, 0.0]);
}

#[test]
fn float_conversions_carry_the_gradient_back_in_the_source_dtype() {
    let x = Var::param(t(&[1.0, 2.0], &[2]));
    let y = x.to_dtype(DType::F32).unwrap().mul_scalar(3.0).unwrap();
    let z = y.to_dtype(DType::F64).unwrap().sum_all().unwrap();
    z.backward().unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.dtype(), DType::F64);
    assert_close(&g.to_vec::<f64>().unwrap(), &[3.0, 3.0]);
    let i = x.to_dtype(DType::I64).unwrap();
    assert!(!i.requires_grad());
}

#[test]
fn closed_form_gradients_of_a_small_network() {
    // L = sum(sigmoid(x w)), dL/dw = xᵀ s(1 - s).
    let x = Var::constant(t(&[1.0, 2.0, -1.0, 0.5], &[2, 2]));
    let w = Var::param(t(&[0.3, -0.2], &[2, 1]));
    x.matmul(&w)
        .unwrap()
        .sigmoid()
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let sig = |z: f64| 1.0 / (1.0 + (-z).exp());
    let (rows, weights) = ([[1.0, 2.0], [-1.0, 0.5]], [0.3, -0.2]);
    let slopes: Vec<f64> = rows
        .iter()
        .map(|r: &[f64; 2]| {
            let s = sig(r[0] * weights[0] + r[1] * weights[1]);
            s * (1.0 - s)
        })
        .collect();
    let expected: Vec<f64> = (0..2)
        .map(|j| rows[0][j] * slopes[0] + rows[1][j] * slopes[1])
        .collect();
    assert_close(&grad_of(&w), &expected);
}

#[test]
fn backward_can_run_on_another_thread() {
    let x = Var::param(t(&[2.0], &[1]));
    let y = x.mul(&x).unwrap().mul(&x).unwrap(); // x^3, dy/dx = 3x^2
    std::thread::spawn(move || y.sum_all().unwrap().backward().unwrap())
        .join()
        .unwrap();
    assert_close(&grad_of(&x), &[12.0]);
}

#[test]
fn operators_work_on_references_and_values() {
    let a = Var::param(t(&[2.0], &[1]));
    let b = Var::param(t(&[4.0], &[1]));
    let y = ((&a * &b).unwrap() + (&a / 2.0).unwrap()).unwrap();
    let y = (y - (-&b).unwrap()).unwrap();
    y.sum_all().unwrap().backward().unwrap();
    // y = ab + a/2 + b: dy/da = b + 1/2, dy/db = a + 1.
    assert_close(&grad_of(&a), &[4.5]);
    assert_close(&grad_of(&b), &[3.0]);
}

#[test]
fn custom_ops_with_a_wrong_gradient_shape_are_rejected() {
    let x = Var::param(t(&[1.0, 2.0], &[2]));
    let y = Var::from_op(x.value(), vec![x.clone()], |g| Ok(vec![Some(g.sum_all()?)]));
    let err = y.sum_all().unwrap().backward().unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
    let z = Var::from_op(x.value(), vec![x.clone()], |_| Ok(vec![]));
    assert!(z.sum_all().unwrap().backward().is_err());
}

/// Bit patterns of a tensor's elements as f64 (NaN payloads aside, equal bits mean equal).
fn bits(t: &Tensor<Cpu>) -> Vec<u64> {
    t.to_vec_f64()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

#[test]
fn casts_between_float_dtypes_pass_the_gradient_through_the_reverse_cast_exactly() {
    // Values that are not 16-bit numbers, so that the gradient's cast has to round.
    let w = [0.1, -1.0 / 3.0, 1e-6, 70000.0, 1.0 + 2f64.powi(-9)];
    for low in [DType::F16, DType::BF16] {
        // 16-bit leaf, computed in f32: d/dx sum(f32(x) * w) = w rounded to the leaf's dtype.
        let x = Var::param(t(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5]).to_dtype(low).unwrap());
        let w32 = t(&w, &[5]).to_dtype(DType::F32).unwrap();
        let y = x.to_dtype(DType::F32).unwrap();
        y.mul(&Var::constant(w32.clone()))
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let g = x.grad().unwrap();
        assert_eq!(g.dtype(), low);
        assert_eq!(bits(&g), bits(&w32.to_dtype(low).unwrap()), "{low}");

        // f32 leaf, computed in 16 bits: the 16-bit upstream gradient widened exactly.
        let p = Var::param(
            t(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5])
                .to_dtype(DType::F32)
                .unwrap(),
        );
        let w_low = t(&w, &[5]).to_dtype(low).unwrap();
        p.to_dtype(low)
            .unwrap()
            .mul(&Var::constant(w_low.clone()))
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let g = p.grad().unwrap();
        assert_eq!(g.dtype(), DType::F32);
        assert_eq!(
            bits(&g),
            bits(&w_low.to_dtype(DType::F32).unwrap()),
            "{low}"
        );
    }
}

/// Per run of a hook: its leaf's name, gradient, and how many watched leaves had one.
type HookLog = Vec<(&'static str, Vec<f64>, usize)>;

/// A hook that records, each time it runs, the leaf's name and gradient, and how many of the
/// watched leaves held a gradient at that moment.
fn recording_hook(
    name: &'static str,
    log: &Arc<Mutex<HookLog>>,
    watched: &[Var<Cpu>],
) -> GradReadyHook<Cpu> {
    let (log, watched) = (log.clone(), watched.to_vec());
    Arc::new(move |leaf: &Var<Cpu>| {
        let with_grad = watched.iter().filter(|v| v.grad().is_some()).count();
        let grad = leaf.grad().map(|g| g.to_vec::<f64>()).transpose()?;
        log.lock()
            .unwrap()
            .push((name, grad.unwrap_or_default(), with_grad));
        Ok(())
    })
}

#[test]
fn grad_ready_hooks_run_once_per_pass_as_soon_as_the_leaf_is_complete() {
    // y = sum(tanh(tanh(x·w1)·w2)·w3): w3's gradient is complete first, w1's last.
    let x = Var::constant(t(&[0.5, -1.0, 2.0, 0.25], &[2, 2]));
    let ws: Vec<Var<Cpu>> = (0..3)
        .map(|i| Var::param(t(&[0.3 + i as f64, -0.2, 0.1, 0.7], &[2, 2])))
        .collect();
    // An identity op between the first two layers logs when its backward runs: w3's and w2's
    // hooks run before it (as soon as they are complete, not at the end of the pass).
    let log = Arc::new(Mutex::new(Vec::new()));
    let forward = || -> tessera_core::Result<Var<Cpu>> {
        let h1 = x.matmul(&ws[0])?.tanh()?;
        let probe_log = log.clone();
        let h1 = Var::from_op(h1.value(), vec![h1.clone()], move |g| {
            probe_log.lock().unwrap().push(("probe", Vec::new(), 0));
            Ok(vec![Some(g.clone())])
        });
        let h = h1.matmul(&ws[1])?.tanh()?;
        h.matmul(&ws[2])?.sum_all()
    };
    // The reference: plain backward.
    forward().unwrap().backward().unwrap();
    let expected: Vec<Vec<f64>> = ws.iter().map(grad_of).collect();
    ws.iter().for_each(Var::zero_grad);
    log.lock().unwrap().clear();
    for (w, name) in ws.iter().zip(["w1", "w2", "w3"]) {
        w.set_grad_ready_hook(Some(recording_hook(name, &log, &ws)))
            .unwrap();
    }
    forward().unwrap().backward().unwrap();
    let mut runs = log.lock().unwrap().clone();
    let names: Vec<_> = runs.iter().map(|r| r.0).collect();
    assert_eq!(names, ["w3", "w2", "probe", "w1"]);
    runs.remove(2);
    // Each saw its complete gradient, and the ones before it had theirs already.
    for (i, (_, grad, with_grad)) in runs.iter().enumerate() {
        assert_eq!(grad, &expected[2 - i]);
        assert_eq!(*with_grad, i + 1);
    }
    // A second pass: once more each, the gradients accumulated.
    forward().unwrap().backward().unwrap();
    assert_eq!(log.lock().unwrap().len(), 8);
    let doubled: Vec<f64> = expected[0].iter().map(|g| 2.0 * g).collect();
    assert_eq!(grad_of(&ws[0]), doubled);
}

#[test]
fn a_leaf_used_twice_runs_its_hook_after_both_uses_and_hook_errors_stop_backward() {
    let w = Var::param(t(&[1.0, 2.0], &[2]));
    let log = Arc::new(Mutex::new(Vec::new()));
    w.set_grad_ready_hook(Some(recording_hook("w", &log, std::slice::from_ref(&w))))
        .unwrap();
    // d/dw sum(w*w + w) = 2w + 1
    w.mul(&w)
        .unwrap()
        .add(&w)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(log.lock().unwrap().as_slice(), &[("w", vec![3.0, 5.0], 1)]);
    // A hook on the root leaf itself runs too.
    let s = Var::param(t(&[4.0], &[1]));
    s.set_grad_ready_hook(Some(recording_hook("s", &log, std::slice::from_ref(&s))))
        .unwrap();
    s.backward().unwrap();
    assert_eq!(log.lock().unwrap().last().unwrap().1, vec![1.0]);
    // An error of a hook is backward's error.
    w.zero_grad();
    w.set_grad_ready_hook(Some(Arc::new(|_: &Var<Cpu>| {
        Err(tessera_core::Error::InvalidArgument {
            op: "test hook",
            msg: "refused".into(),
        })
    })))
    .unwrap();
    let err = w
        .mul(&w)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
    // The hooked leaf got its gradient before its hook ran, and keeps it.
    assert_eq!(grad_of(&w), vec![2.0, 4.0]);
    w.zero_grad();
    // Only leaves that require grad take one; None removes it.
    let c = Var::constant(t(&[1.0], &[1]));
    assert!(c
        .set_grad_ready_hook(Some(recording_hook("c", &log, &[])))
        .is_err());
    let op = w.mul(&w).unwrap();
    assert!(op
        .set_grad_ready_hook(Some(recording_hook("op", &log, &[])))
        .is_err());
    w.set_grad_ready_hook(None).unwrap();
    assert!(w.grad_ready_hook().is_none());
    w.mul(&w).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(grad_of(&w), vec![2.0, 4.0]);
}

#[test]
fn a_hooked_leaf_nothing_flows_into_still_runs_its_hook_without_a_gradient() {
    // argmax-like ops give no gradient: the custom op below returns None for its parent.
    let w = Var::param(t(&[1.0, 2.0], &[2]));
    let v = Var::param(t(&[3.0], &[1]));
    let log = Arc::new(Mutex::new(Vec::new()));
    w.set_grad_ready_hook(Some(recording_hook("w", &log, std::slice::from_ref(&w))))
        .unwrap();
    let blocked = Var::from_op(
        w.value().sum_all().unwrap().reshape([1]).unwrap(),
        vec![w.clone()],
        |_| Ok(vec![None]),
    );
    blocked
        .add(&v)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(log.lock().unwrap().as_slice(), &[("w", vec![], 0)]);
    assert!(w.grad().is_none());
    assert_eq!(grad_of(&v), vec![1.0]);
}
