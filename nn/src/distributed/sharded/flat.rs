//! [`FlatBucket`]: a bucket of parameters laid end to end in one flat vector, padded to a
//! multiple of the world size, and the share of it each rank owns.

use crate::distributed::buckets::Bucket;
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Result, Tensor};

/// Where a bucket's parameters sit in its flat vector, and this rank's share of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FlatBucket {
    /// Indices into the parameter list, in the order they are laid out.
    pub params: Vec<usize>,
    /// The parameters' dtype.
    pub dtype: DType,
    /// Elements of the parameters (without padding).
    pub numel: usize,
    /// Elements of one rank's share: `numel` rounded up to a multiple of the world size,
    /// divided by it.
    pub shard_len: usize,
    /// This rank's share starts at `rank * shard_len`.
    pub shard_start: usize,
}

impl FlatBucket {
    /// The layout of `bucket` for `rank` of `world_size` ranks.
    pub fn new(bucket: &Bucket, rank: usize, world_size: usize) -> FlatBucket {
        let shard_len = bucket.numel.div_ceil(world_size);
        FlatBucket {
            params: bucket.params.clone(),
            dtype: bucket.dtype,
            numel: bucket.numel,
            shard_len,
            shard_start: rank * shard_len,
        }
    }

    /// Elements of the padded flat vector (`world_size * shard_len`).
    pub fn padded_len(&self, world_size: usize) -> usize {
        self.shard_len * world_size
    }

    /// The tensors `pick(param)` of the bucket's parameters, flattened end to end and padded
    /// with zeros to `world_size * shard_len` elements.
    pub fn flatten<B: Backend>(
        &self,
        params: &[(String, Var<B>)],
        world_size: usize,
        mut pick: impl FnMut(&Var<B>) -> Result<Tensor<B>>,
    ) -> Result<Tensor<B>> {
        let mut pieces = Vec::with_capacity(self.params.len() + 1);
        let mut backend = None;
        for &index in &self.params {
            let var = &params[index].1;
            let t = pick(var)?;
            backend.get_or_insert_with(|| t.backend().clone());
            pieces.push(t.reshape([var.numel()])?);
        }
        let padding = self.padded_len(world_size) - self.numel;
        if padding > 0 {
            let backend = backend.expect("a bucket holds at least one parameter");
            pieces.push(Tensor::zeros([padding], self.dtype, &backend)?);
        }
        if pieces.len() == 1 {
            return pieces.pop().expect("one piece").contiguous();
        }
        let refs: Vec<&Tensor<B>> = pieces.iter().collect();
        Tensor::cat(&refs, 0)
    }

    /// The bucket's parameters' gradients, flattened and padded as by [`FlatBucket::flatten`]
    /// (zeros for a parameter without one): what a reduction of the bucket sends.
    pub fn flatten_grads<B: Backend>(
        &self,
        params: &[(String, Var<B>)],
        world_size: usize,
    ) -> Result<Tensor<B>> {
        self.flatten(params, world_size, |v| match v.grad() {
            Some(g) => Ok(g),
            None => v.value().zeros_like(),
        })
    }

    /// This rank's share of the flat vector of `pick(param)`, read from the parameters'
    /// tensors directly (only the elements of the share are copied).
    pub fn share<B: Backend>(
        &self,
        params: &[(String, Var<B>)],
        mut pick: impl FnMut(&Var<B>) -> Result<Tensor<B>>,
    ) -> Result<Tensor<B>> {
        let (lo, hi) = (self.shard_start, self.shard_start + self.shard_len);
        let mut pieces = Vec::new();
        let mut covered = 0;
        let mut offset = 0;
        let mut backend = None;
        for &index in &self.params {
            let var = &params[index].1;
            let n = var.numel();
            let (a, b) = (offset.max(lo), (offset + n).min(hi));
            if a < b {
                let t = pick(var)?;
                pieces.push(t.reshape([n])?.narrow(0, a - offset, b - a)?);
                covered += b - a;
            }
            if backend.is_none() {
                backend = Some(var.value().backend().clone());
            }
            offset += n;
        }
        if covered < self.shard_len {
            let backend = backend.expect("a bucket holds at least one parameter");
            pieces.push(Tensor::zeros(
                [self.shard_len - covered],
                self.dtype,
                &backend,
            )?);
        }
        // Compact: a share cut from one parameter must not keep the whole parameter alive.
        if pieces.len() == 1 {
            return pieces.pop().expect("one piece").compact();
        }
        let refs: Vec<&Tensor<B>> = pieces.iter().collect();
        Tensor::cat(&refs, 0)
    }

    /// The pieces of the bucket's parameters that fall in this rank's share, cut from `share`
    /// (a tensor laid out as this rank's share: a parameter's values, or a state entry):
    /// `(parameter index, offset in the flattened parameter, rank-1 piece)`. The padding is
    /// left out.
    pub fn share_pieces<B: Backend>(
        &self,
        params: &[(String, Var<B>)],
        share: &Tensor<B>,
    ) -> Result<Vec<(usize, usize, Tensor<B>)>> {
        let (lo, hi) = (self.shard_start, self.shard_start + self.shard_len);
        let mut out = Vec::new();
        let mut offset = 0;
        for &index in &self.params {
            let n = params[index].1.numel();
            let (a, b) = (offset.max(lo), (offset + n).min(hi));
            if a < b {
                let piece = share.narrow(0, a - lo, b - a)?.contiguous()?;
                out.push((index, a - offset, piece));
            }
            offset += n;
        }
        Ok(out)
    }

    /// This rank's share of a padded flat vector, in a storage of its own (the whole vector is
    /// freed once nothing else holds it).
    pub fn shard_of<B: Backend>(&self, flat: &Tensor<B>) -> Result<Tensor<B>> {
        flat.narrow(0, self.shard_start, self.shard_len)?.compact()
    }

    /// Each parameter's piece of a (padded or not) flat vector, shaped like the parameter.
    pub fn pieces<B: Backend>(
        &self,
        params: &[(String, Var<B>)],
        flat: &Tensor<B>,
    ) -> Result<Vec<(usize, Tensor<B>)>> {
        let mut offset = 0;
        let mut out = Vec::with_capacity(self.params.len());
        for &index in &self.params {
            let var = &params[index].1;
            let n = var.numel();
            let piece = flat.narrow(0, offset, n)?.reshape(var.dims().to_vec())?;
            out.push((index, piece));
            offset += n;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::plan_buckets;
    use tessera_cpu::Cpu;

    #[test]
    fn shares_cover_the_padded_vector_and_pieces_invert_flatten() -> Result<()> {
        let dev = Cpu::new();
        let params: Vec<(String, Var<Cpu>)> = [vec![2, 3], vec![5], vec![1]]
            .into_iter()
            .enumerate()
            .map(|(i, dims)| {
                let n: usize = dims.iter().product();
                let values: Vec<f32> = (0..n).map(|k| (10 * i + k) as f32).collect();
                Ok((
                    format!("p{i}"),
                    Var::param(Tensor::from_vec(values, dims, &dev)?),
                ))
            })
            .collect::<Result<_>>()?;
        let sizes: Vec<_> = params.iter().map(|(_, v)| (v.dtype(), v.numel())).collect();
        let buckets = plan_buckets(&sizes, 1 << 20);
        assert_eq!(buckets.len(), 1);
        for world in 1..=5 {
            let mut covered = Vec::new();
            let mut pieces_seen = Vec::new();
            for rank in 0..world {
                let flat = FlatBucket::new(&buckets[0], rank, world);
                assert!(flat.shard_len * world >= 12 && flat.shard_len * world < 12 + world);
                covered.extend(flat.shard_start..flat.shard_start + flat.shard_len);
                let vector = flat.flatten(&params, world, |v| Ok(v.value()))?;
                assert_eq!(vector.numel(), flat.padded_len(world));
                for (index, piece) in flat.pieces(&params, &vector)? {
                    assert_eq!(
                        piece.to_vec::<f32>()?,
                        params[index].1.value().to_vec::<f32>()?
                    );
                }
                assert_eq!(
                    flat.share(&params, |v| Ok(v.value()))?.to_vec::<f32>()?,
                    flat.shard_of(&vector)?.to_vec::<f32>()?
                );
                let share = flat.share(&params, |v| Ok(v.value()))?;
                for (index, offset, piece) in flat.share_pieces(&params, &share)? {
                    let whole = params[index].1.value().to_vec::<f32>()?;
                    let got = piece.to_vec::<f32>()?;
                    assert_eq!(got, whole[offset..offset + got.len()]);
                    pieces_seen.push((index, offset, got.len()));
                }
                let tail = vector.narrow(0, 12, flat.padded_len(world) - 12)?;
                assert!(tail.to_vec::<f32>()?.iter().all(|&x| x == 0.0));
            }
            assert_eq!(covered, (0..covered.len()).collect::<Vec<_>>());
            // The ranks' pieces cover every element of every parameter exactly once.
            for (index, (_, var)) in params.iter().enumerate() {
                let mut spans: Vec<(usize, usize)> = pieces_seen
                    .iter()
                    .filter(|p| p.0 == index)
                    .map(|p| (p.1, p.2))
                    .collect();
                spans.sort();
                let mut next = 0;
                for (offset, len) in spans {
                    assert_eq!(offset, next);
                    next += len;
                }
                assert_eq!(next, var.numel());
            }
        }
        Ok(())
    }
}
