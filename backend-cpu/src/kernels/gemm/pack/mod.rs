//! Packing a block of a strided operand into the panel layout the micro-kernel reads.
//!
//! A block of `lines` lines (rows of A, or columns of B) by `depth` steps along k is cut into
//! panels of `width` lines; panel `q` holds, for each step `p`, the `width` values of its lines
//! side by side:
//!
//! ```text
//! dst[q*width*depth + p*width + i] = src(q*width + i, p)      (0 past the last line)
//! ```
//!
//! so the micro-kernel reads each panel front to back. The source is addressed through its two
//! strides, whatever they are: a transposed operand is packed as it lies, never copied first.
//! A unit stride along the lines (packing B of a row-major product) copies runs; a unit stride
//! along k (A of a row-major product, or a transposed B) reads each line as a run, and is
//! handed to the micro-kernel's SIMD transposing packer when it has one (`avx512`).

#[cfg(all(target_arch = "x86_64", tessera_avx512))]
pub(crate) mod avx512;

use super::GemmElement;

/// A SIMD packer for one panel whose source has `step_stride == 1`:
/// `(dst, src, line_stride, used, depth, width)`, with the meaning of [`pack`]'s arguments;
/// it writes the slots of lines `< used` only.
///
/// # Safety
/// As [`pack`] for the panel; `dst` must hold `width * depth` elements; the CPU must have the
/// packer's target features.
pub(crate) type TransposePack<T> = unsafe fn(*mut T, *const T, isize, usize, usize, usize);

/// A strided source block: element `(line, step)` is at `ptr + line*line_stride +
/// step*step_stride`.
#[derive(Clone, Copy)]
pub(super) struct Source<T> {
    pub(super) ptr: *const T,
    pub(super) line_stride: isize,
    pub(super) step_stride: isize,
}

/// Packs `lines x depth` elements of `src` into `dst` as panels of `width` lines (zero-padded
/// to a whole panel), through `transpose` where the source's steps are adjacent and it is
/// given. `dst` must hold `lines.div_ceil(width) * width * depth` elements.
///
/// # Safety
/// Every element `(line, step)` with `line < lines`, `step < depth` of `src` must be readable;
/// the CPU must support `transpose`.
pub(super) unsafe fn pack<T: GemmElement>(
    dst: &mut [T],
    src: Source<T>,
    lines: usize,
    depth: usize,
    width: usize,
    transpose: Option<TransposePack<T>>,
) {
    let panels = lines.div_ceil(width);
    assert!(
        dst.len() >= panels * width * depth,
        "packing buffer too short"
    );
    if src.line_stride == 1 && panels > 1 {
        // SAFETY: forwarded.
        unsafe { pack_adjacent_lines(dst, src, lines, depth, width) };
        return;
    }
    for (q, panel) in dst.chunks_exact_mut(width * depth).take(panels).enumerate() {
        let first = q * width;
        let used = width.min(lines - first);
        // SAFETY: lines `first..first + used` are below `lines`.
        let src = Source {
            ptr: unsafe { src.ptr.offset(first as isize * src.line_stride) },
            ..src
        };
        // SAFETY: forwarded; the panel holds `width * depth` elements.
        unsafe {
            match transpose {
                Some(transpose) if src.step_stride == 1 && src.line_stride != 1 => {
                    if used < width {
                        panel.fill(T::ZERO);
                    }
                    transpose(
                        panel.as_mut_ptr(),
                        src.ptr,
                        src.line_stride,
                        used,
                        depth,
                        width,
                    );
                }
                _ => pack_panel(panel, src, used, depth, width),
            }
        }
    }
}

/// [`pack`] for a source whose lines are adjacent (`line_stride == 1`: B of a row-major
/// product, or a transposed A): step by step, each step's run of `lines` elements read front to
/// back and dealt out to the panels, so the source streams in memory order instead of being
/// walked once per panel with a stride of a whole row.
///
/// # Safety
/// As [`pack`]; `dst` holds `lines.div_ceil(width) * width * depth` elements.
unsafe fn pack_adjacent_lines<T: GemmElement>(
    dst: &mut [T],
    src: Source<T>,
    lines: usize,
    depth: usize,
    width: usize,
) {
    let panels = lines.div_ceil(width);
    let last = lines - (panels - 1) * width;
    if last < width {
        dst[(panels - 1) * width * depth..panels * width * depth].fill(T::ZERO);
    }
    // SAFETY: forwarded.
    unsafe {
        match width {
            // The usual widths as constants, so whole-panel copies are inlined moves.
            32 => deal_steps::<T, 32>(dst, src, lines, depth),
            16 => deal_steps::<T, 16>(dst, src, lines, depth),
            12 => deal_steps::<T, 12>(dst, src, lines, depth),
            8 => deal_steps::<T, 8>(dst, src, lines, depth),
            6 => deal_steps::<T, 6>(dst, src, lines, depth),
            _ => {
                for p in 0..depth {
                    let step = src.ptr.offset(p as isize * src.step_stride);
                    let run = std::slice::from_raw_parts(step, lines);
                    for (q, part) in run.chunks(width).enumerate() {
                        let at = q * width * depth + p * width;
                        dst[at..at + part.len()].copy_from_slice(part);
                    }
                }
            }
        }
    }
}

/// The loop of [`pack_adjacent_lines`] for panels of `W` lines.
///
/// # Safety
/// As [`pack_adjacent_lines`].
#[inline(always)]
unsafe fn deal_steps<T: GemmElement, const W: usize>(
    dst: &mut [T],
    src: Source<T>,
    lines: usize,
    depth: usize,
) {
    let whole = lines / W;
    for p in 0..depth {
        // SAFETY: step `p < depth` has `lines` adjacent readable elements.
        let run = unsafe {
            std::slice::from_raw_parts(src.ptr.offset(p as isize * src.step_stride), lines)
        };
        for (q, part) in run.chunks_exact(W).enumerate() {
            let at = q * W * depth + p * W;
            dst[at..at + W].copy_from_slice(part);
        }
        let rest = &run[whole * W..];
        if !rest.is_empty() {
            let at = whole * W * depth + p * W;
            dst[at..at + rest.len()].copy_from_slice(rest);
        }
    }
}

/// Packs `lines x depth` elements of a source whose steps are adjacent (`step_stride == 1`,
/// a row-major A) into panels of `width` lines stored line by line, `stride >= depth` apart:
///
/// ```text
/// dst[q*width*stride + i*stride + p] = src(q*width + i, p)      (0 past the last line)
/// ```
///
/// for `p < depth`: one copy per line. `dst` must hold `lines.div_ceil(width) * width * stride`
/// elements.
///
/// # Safety
/// Every element `(line, step)` with `line < lines`, `step < depth` of `src` must be readable.
pub(super) unsafe fn pack_rows<T: GemmElement>(
    dst: &mut [T],
    src: Source<T>,
    lines: usize,
    depth: usize,
    width: usize,
    stride: usize,
) {
    assert!(
        src.step_stride == 1 && stride >= depth,
        "not a row-major source"
    );
    let padded = lines.div_ceil(width) * width;
    assert!(dst.len() >= padded * stride, "packing buffer too short");
    for (i, row) in dst.chunks_exact_mut(stride).take(padded).enumerate() {
        if i < lines {
            // SAFETY: line `i < lines` has `depth` adjacent readable elements.
            let line = unsafe {
                std::slice::from_raw_parts(src.ptr.offset(i as isize * src.line_stride), depth)
            };
            row[..depth].copy_from_slice(line);
        } else {
            row[..depth].fill(T::ZERO);
        }
    }
}

/// One panel: `used <= width` lines, zero-padded to `width`.
///
/// # Safety
/// As [`pack`] for `used` lines.
unsafe fn pack_panel<T: GemmElement>(
    panel: &mut [T],
    src: Source<T>,
    used: usize,
    depth: usize,
    width: usize,
) {
    let Source {
        ptr,
        line_stride,
        step_stride,
    } = src;
    if used < width {
        panel.fill(T::ZERO);
    }
    // SAFETY (all three loops): `i < used` and `p < depth`, so every read is inside the block
    // the caller vouched for; writes index `panel`, which bounds-checks them
    // (or stay below the length asserted).
    unsafe {
        if line_stride == 1 {
            // The lines of one step are adjacent: copy runs of `used`.
            match (used == width, width) {
                // Whole panels of the usual widths: fixed-size copies the compiler inlines.
                (true, 32) => copy_runs::<T, 32>(panel, ptr, step_stride, depth),
                (true, 16) => copy_runs::<T, 16>(panel, ptr, step_stride, depth),
                (true, 12) => copy_runs::<T, 12>(panel, ptr, step_stride, depth),
                (true, 8) => copy_runs::<T, 8>(panel, ptr, step_stride, depth),
                (true, 6) => copy_runs::<T, 6>(panel, ptr, step_stride, depth),
                _ => {
                    for (p, row) in panel.chunks_exact_mut(width).take(depth).enumerate() {
                        let step = ptr.offset(p as isize * step_stride);
                        row[..used].copy_from_slice(std::slice::from_raw_parts(step, used));
                    }
                }
            }
        } else if step_stride == 1 {
            // Each line is a run along k: read it front to back, scatter by `width`.
            // (Unchecked writes: `p * width + i < depth * width <= panel.len()`.)
            assert!(panel.len() >= depth * width);
            let out = panel.as_mut_ptr();
            for i in 0..used {
                let line = std::slice::from_raw_parts(ptr.offset(i as isize * line_stride), depth);
                for (p, &v) in line.iter().enumerate() {
                    *out.add(p * width + i) = v;
                }
            }
        } else {
            for (p, row) in panel.chunks_exact_mut(width).take(depth).enumerate() {
                let step = ptr.offset(p as isize * step_stride);
                for (i, dst) in row[..used].iter_mut().enumerate() {
                    *dst = *step.offset(i as isize * line_stride);
                }
            }
        }
    }
}

/// A whole panel of `W` lines whose lines are adjacent: one run of `W` per step.
///
/// # Safety
/// `W` elements from `ptr + p*step_stride` (`p < depth`) must be readable.
#[inline(always)]
unsafe fn copy_runs<T: GemmElement, const W: usize>(
    panel: &mut [T],
    ptr: *const T,
    step_stride: isize,
    depth: usize,
) {
    for (p, row) in panel.chunks_exact_mut(W).take(depth).enumerate() {
        // SAFETY: the caller's contract.
        let run = unsafe { &*ptr.offset(p as isize * step_stride).cast::<[T; W]>() };
        row.copy_from_slice(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs `lines x depth` of a matrix stored with the given strides and checks every slot
    /// against the layout formula.
    fn check(lines: usize, depth: usize, width: usize, line_stride: isize, step_stride: isize) {
        let len = (lines.max(1) - 1) * line_stride as usize
            + (depth.max(1) - 1) * step_stride as usize
            + 1;
        let data: Vec<f32> = (0..len).map(|i| i as f32 + 1.0).collect();
        let panels = lines.div_ceil(width);
        let mut dst = vec![f32::NAN; panels * width * depth];
        let src = Source {
            ptr: data.as_ptr(),
            line_stride,
            step_stride,
        };
        // SAFETY: `data` holds every element of the block.
        unsafe { pack(&mut dst, src, lines, depth, width, None) };
        for q in 0..panels {
            for p in 0..depth {
                for i in 0..width {
                    let line = q * width + i;
                    let want = if line < lines {
                        data[line * line_stride as usize + p * step_stride as usize]
                    } else {
                        0.0
                    };
                    assert_eq!(dst[q * width * depth + p * width + i], want, "{q} {p} {i}");
                }
            }
        }
    }

    #[test]
    fn row_major_panels_hold_each_line_at_its_stride() {
        let (lines, depth, width, stride) = (5, 3, 2, 4);
        let data: Vec<f32> = (0..lines * 7).map(|i| i as f32 + 1.0).collect();
        let src = Source {
            ptr: data.as_ptr(),
            line_stride: 7,
            step_stride: 1,
        };
        let mut dst = vec![f32::NAN; 6 * stride];
        // SAFETY: `data` holds every element of the block.
        unsafe { pack_rows(&mut dst, src, lines, depth, width, stride) };
        for i in 0..6 {
            for p in 0..depth {
                let want = if i < lines { data[i * 7 + p] } else { 0.0 };
                assert_eq!(dst[i * stride + p], want, "{i} {p}");
            }
        }
    }

    #[test]
    fn every_stride_pattern_packs_to_the_panel_layout() {
        for (lines, depth, width) in [(5, 3, 2), (4, 4, 4), (1, 7, 3), (7, 1, 4)] {
            check(lines, depth, width, 1, lines as isize); // lines adjacent
            check(lines, depth, width, depth as isize, 1); // steps adjacent
            check(lines, depth, width, 2 * depth as isize + 1, 2); // neither
            check(lines, depth, width, 1, lines as isize + 3); // padded rows
        }
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", tessera_avx512))]
    #[cfg_attr(miri, ignore = "SIMD intrinsics: not for Miri")]
    fn the_avx512_transposing_packers_match_the_portable_packing() {
        if !std::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: this CPU has no AVX-512F");
            return;
        }
        fn compare<T: GemmElement + From<u16>>(transpose: TransposePack<T>) {
            for (lines, depth, width) in [
                (12, 16, 12),
                (5, 3, 12),
                (32, 40, 32),
                (33, 17, 16),
                (7, 9, 8),
            ] {
                let line_stride = depth as isize + 3;
                let data: Vec<T> = (0..lines * line_stride as usize)
                    .map(|i| T::from(i as u16))
                    .collect();
                let src = Source {
                    ptr: data.as_ptr(),
                    line_stride,
                    step_stride: 1,
                };
                let len = lines.div_ceil(width) * width * depth;
                let (mut want, mut got) = (vec![T::ONE; len], vec![T::ONE; len]);
                // SAFETY: `data` holds the block; the packer's CPU feature was checked above.
                unsafe {
                    pack(&mut want, src, lines, depth, width, None);
                    pack(&mut got, src, lines, depth, width, Some(transpose));
                }
                assert_eq!(got, want, "{lines} x {depth} in panels of {width}");
            }
        }
        compare::<f32>(avx512::transpose_f32);
        compare::<f64>(avx512::transpose_f64);
    }
}
