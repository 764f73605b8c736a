//! [`UnitPrefetch`]: which unit of a [`super::ShardedUnits`] runs next, learned from the order
//! the units ran in, and the gather started ahead for it (FSDP's forward and backward
//! prefetch).
//!
//! The order is learned, not declared: a forward pass records which unit ran right after which,
//! so the next pass can start the next unit's gather before the current unit computes, and a
//! backward pass (units in the reverse order) the previous one's. A pass ends at a backward
//! pass or when a unit runs a second time (the next forward pass, e.g. evaluation), so the last
//! unit of a pass predicts nothing. Every rank runs the same units in the same order, so every
//! rank predicts the same and starts the same collectives. A wrong guess costs a wasted
//! gather, never a wrong value: a gather is used only by the unit it was started for, and only
//! if none of that unit's shares was replaced since it started (an optimizer step, a restored
//! checkpoint).

use super::units::UnitPart;
use crate::distributed::PendingCollective;
use std::sync::Arc;
use tessera_core::{Backend, Result, Tensor};

/// A gather started ahead of its unit's use.
pub(crate) struct Prefetched<B: Backend> {
    /// The unit it gathers.
    pub unit: usize,
    /// One per part of the unit: the shares it was started from, and its handle.
    pub gathers: Vec<(Tensor<B>, PendingCollective<B>)>,
}

impl<B: Backend> Prefetched<B> {
    /// Whether this gather serves `unit` whose parts are `parts`: the same unit, and every
    /// share still the tensor it was started from.
    pub fn serves(&self, unit: usize, parts: &[Arc<UnitPart<B>>]) -> bool {
        self.unit == unit
            && self.gathers.len() == parts.len()
            && self
                .gathers
                .iter()
                .zip(parts)
                .all(|((started_from, _), part)| same_tensor(started_from, &part.shard.value()))
    }

    /// Waits for every part's gather: the whole flat parameters, in part order.
    pub fn wait(self) -> Result<Vec<Tensor<B>>> {
        self.gathers.into_iter().map(|(_, g)| g.wait()).collect()
    }
}

/// Whether `a` and `b` are the same values: one storage, one layout. Tensors are immutable
/// while shared (the prefetch holds the share it started from), so this is exact.
fn same_tensor<B: Backend>(a: &Tensor<B>, b: &Tensor<B>) -> bool {
    Arc::ptr_eq(a.storage_arc(), b.storage_arc()) && a.layout() == b.layout()
}

/// What the prefetch of one [`super::ShardedUnits`] knows and holds.
pub(crate) struct UnitPrefetch<B: Backend> {
    /// Whether gathers are started ahead ([`super::ShardedUnits::set_prefetch`]).
    pub enabled: bool,
    /// The unit whose forward pass ran last in the current pass.
    last_forward: Option<usize>,
    /// Which units ran in the current forward pass.
    ran: Vec<bool>,
    /// `next[u]`: the unit whose forward pass followed `u`'s last time.
    next: Vec<Option<usize>>,
    /// `previous[u]`: the unit whose forward pass preceded `u`'s last time.
    previous: Vec<Option<usize>>,
    /// The gather started ahead, if any.
    pub pending: Option<Prefetched<B>>,
}

impl<B: Backend> UnitPrefetch<B> {
    /// Nothing learned yet, over `units` units.
    pub fn new(units: usize) -> Self {
        UnitPrefetch {
            enabled: false,
            last_forward: None,
            ran: vec![false; units],
            next: vec![None; units],
            previous: vec![None; units],
            pending: None,
        }
    }

    /// Records that `unit`'s forward pass runs now and returns the unit predicted to run after
    /// it (the one that followed it last time).
    pub fn forward(&mut self, unit: usize) -> Option<usize> {
        if self.ran[unit] {
            // A new pass: the last one's final unit had no successor within it.
            self.end_pass();
        }
        self.ran[unit] = true;
        match self.last_forward.replace(unit) {
            Some(before) => {
                self.next[before] = Some(unit);
                self.previous[unit] = Some(before);
            }
            None => self.previous[unit] = None,
        }
        self.next[unit]
    }

    /// Records that `unit`'s backward pass runs now and returns the unit predicted to run
    /// after it (the one whose forward pass preceded it).
    pub fn backward(&mut self, unit: usize) -> Option<usize> {
        self.end_pass();
        self.previous[unit]
    }

    /// Ends the current forward pass (if one is under way): its last unit has no successor.
    fn end_pass(&mut self) {
        if let Some(last) = self.last_forward.take() {
            self.next[last] = None;
        }
        self.ran.iter_mut().for_each(|r| *r = false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_cpu::Cpu;

    #[test]
    fn the_order_is_learned_from_forward_passes_and_reversed_for_backward() {
        let mut p = UnitPrefetch::<Cpu>::new(3);
        // The first pass knows nothing.
        assert_eq!(p.forward(0), None);
        assert_eq!(p.forward(1), None);
        assert_eq!(p.forward(2), None);
        assert_eq!(p.backward(2), Some(1));
        assert_eq!(p.backward(1), Some(0));
        assert_eq!(p.backward(0), None);
        // The second pass predicts the next unit, and the last unit none (a backward pass
        // followed it).
        assert_eq!(p.forward(0), Some(1));
        assert_eq!(p.forward(1), Some(2));
        assert_eq!(p.forward(2), None);
        // Evaluation passes without backward: a pass ends where a unit runs again, and its
        // last unit still predicts nothing.
        assert_eq!(p.forward(0), Some(1));
        assert_eq!(p.forward(1), Some(2));
        assert_eq!(p.forward(2), None);
        assert_eq!(p.forward(0), Some(1));
        assert_eq!(p.backward(2), Some(1));
    }

    #[test]
    fn a_changed_order_is_relearned() {
        let mut p = UnitPrefetch::<Cpu>::new(3);
        for unit in [0, 1, 2] {
            p.forward(unit);
        }
        p.backward(2);
        // Unit 1 skipped this time: unit 0 still predicts 1 (a wasted gather), then learns 2.
        assert_eq!(p.forward(0), Some(1));
        assert_eq!(p.forward(2), None);
        assert_eq!(p.backward(2), Some(0));
        assert_eq!(p.forward(0), Some(2));
    }
}
