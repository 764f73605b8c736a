//! `DistributedSampler` (`new`, `indices`, `indices_from`) with any sizes: a rank outside the
//! group is a typed error; otherwise the ranks' shares of what is left of an epoch after any
//! offset are equally long, hold only items of the data set, and together deal every item left
//! exactly once, plus fewer than one item per rank of padding (or, with `drop_last`, at most
//! once, fewer than one per rank left out).

use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome};
use tessera_nn::distributed::DistributedSampler;

fn deal<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let (len, world, rank) = (c.size(0) % 120, c.size(1) % 7, c.size(2) % 8);
    let (offset, epoch, drop_last) = (c.size(3) % 130, c.seed(4), c.flag(5));
    let make = |r: usize| {
        DistributedSampler::new(len, r, world).map(|s| s.shuffled(epoch ^ 5).drop_last(drop_last))
    };
    if let Err(e) = make(rank) {
        return match world == 0 || rank >= world {
            true => Outcome::Err(e.to_string()),
            false => Outcome::Break(format!("rank {rank} of {world} refused: {e}")),
        };
    }
    if world == 0 || rank >= world {
        return Outcome::Break(format!("rank {rank} of a group of {world} accepted"));
    }
    let mut shares = Vec::new();
    for r in 0..world {
        let sampler = match make(r) {
            Ok(s) => s,
            Err(e) => return Outcome::Break(format!("rank {r} of {world} refused: {e}")),
        };
        if sampler.indices_from(epoch, 0) != sampler.indices(epoch) {
            return Outcome::Break("indices_from(epoch, 0) is not indices(epoch)".into());
        }
        shares.push(sampler.indices_from(epoch, offset));
    }
    let per_rank = shares[0].len();
    if shares.iter().any(|s| s.len() != per_rank) {
        let lens: Vec<usize> = shares.iter().map(Vec::len).collect();
        return Outcome::Break(format!("shares of different lengths: {lens:?}"));
    }
    let mut seen = vec![0usize; len];
    for &item in shares.iter().flatten() {
        match seen.get_mut(item) {
            Some(n) => *n += 1,
            None => return Outcome::Break(format!("item {item} of a data set of {len}")),
        }
    }
    // The items left are those the offset did not cover (the epoch's order is a permutation).
    let left = len.saturating_sub(offset);
    let dealt = per_rank * world;
    let once = seen.iter().filter(|&&n| n == 1).count();
    let fine = match drop_last {
        true => seen.iter().all(|&n| n <= 1) && dealt <= left && left - dealt < world,
        false => {
            dealt >= left
                && dealt - left < world
                && once + seen.iter().filter(|&&n| n >= 2).count() == left
        }
    };
    match fine {
        true => Outcome::Ok(Vec::new()),
        false => Outcome::Break(format!(
            "{len} items, offset {offset}, {world} ranks (drop_last {drop_last}): {dealt} dealt, \
             {left} left"
        )),
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![op(
        "DistributedSampler::indices_from: every item left dealt once",
        1,
        &[SIZE, SIZE, SIZE, SIZE, SEED, B],
        NONE,
        |c| Ok(deal(c)),
    )
    .work(|_| Ok(1 << 10))]
}
