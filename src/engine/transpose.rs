//! Staging a transposed operand. An operand read across its rows (a large stride in the inner
//! loop) costs a cache line per element and a scalar load each, which no compiler vectorises,
//! and with power-of-two row pitches every such line falls in one L1 set. The engine copies a
//! slab of such an operand at a time, transposed, into a small buffer, reading it along its
//! rows, and then runs the
//! ordinary unit-stride kernels over it. The copy moves bits, so it is only done for the
//! primitive types whose values are their bits.

use std::any::TypeId;

/// The most columns of a block staged at a time: a slab (`stage::SLAB_BYTES`) of this many
/// elements of a staged operand is 34-48 KiB, about L1, and the kernel's rows stay long.
pub(super) const TILE: usize = 128;

/// The element size of `T` when its values may be copied as raw bits (a primitive number,
/// `bool`, or `half`'s `f16` and `bf16`: no padding, no drop, no interior mutability, aligned to
/// their size), else `None`.
pub(super) fn plain_size<T>() -> Option<usize> {
    let id = typeid::of::<T>();
    let plain: [TypeId; 13] = [
        TypeId::of::<f32>(),
        TypeId::of::<f64>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<isize>(),
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<bool>(),
    ];
    #[cfg(feature = "half")]
    if id == TypeId::of::<half::f16>() || id == TypeId::of::<half::bf16>() {
        return Some(2);
    }
    plain.contains(&id).then_some(std::mem::size_of::<T>())
}

/// Copies `shape = [rows, cols]` (`cols <= |pitch|`), transposed into rows `pitch` elements
/// apart: `dst[r * pitch + c] = src[c * stride + r]` for `r < rows`, `c < cols`, for
/// elements of `size` bytes (a size [`plain_size`] returned). A negative `pitch` writes the rows
/// upwards from `dst` (how a source read backwards along its rows lands in order). Whole 8x8
/// blocks go through the AVX register transposes (4- and 8-byte elements on a CPU with AVX2),
/// the rest (and everything elsewhere) one by one, eight source rows at a time.
///
/// # Safety
/// `src` points at a plain element such that every `src[c * stride + r]` (`r < rows`,
/// `c < cols`) is an initialised element of the same array; every `dst[r * pitch + c]` is
/// valid for a write of `size` bytes, aligned for it, and overlaps nothing read.
pub(super) unsafe fn transpose_tile(
    src: *const u8,
    stride: isize,
    dst: *mut u8,
    pitch: isize,
    size: usize,
    shape: [usize; 2],
) {
    // SAFETY: the callee for the element size gets the caller's pointers and shape
    // unchanged (its contract is this function's, for that size); the AVX copies are taken
    // only where the CPU has been checked to have AVX2, and so AVX.
    unsafe {
        debug_assert!(shape[1] <= pitch.unsigned_abs());
        #[cfg(target_arch = "x86_64")]
        if super::kernel::simd() >= super::kernel::Simd::Avx2 {
            match size {
                4 => {
                    return copy::<f32>(src.cast(), stride, dst.cast(), pitch, shape, avx::tile_32)
                }
                8 => {
                    return copy::<f64>(src.cast(), stride, dst.cast(), pitch, shape, avx::tile_64)
                }
                _ => {}
            }
        }
        match size {
            1 => one_by_one::<u8>(src.cast(), stride, 1, dst.cast(), pitch, shape, 0),
            2 => one_by_one::<u16>(src.cast(), stride, 1, dst.cast(), pitch, shape, 0),
            4 => one_by_one::<u32>(src.cast(), stride, 1, dst.cast(), pitch, shape, 0),
            8 => one_by_one::<u64>(src.cast(), stride, 1, dst.cast(), pitch, shape, 0),
            _ => unreachable!("plain_size gives 1, 2, 4 or 8 bytes"),
        }
    }
}

/// [`transpose_tile`] element by element from column `from` on (any step).
///
/// # Safety
/// As [`transpose_tile`], with `U` of the element size.
unsafe fn one_by_one<U: Copy>(
    src: *const U,
    stride: isize,
    step: isize,
    dst: *mut U,
    p: isize,
    [rows, cols]: [usize; 2],
    from: usize,
) {
    // SAFETY: every `src[c * stride + r * step]` and `dst[r * p + c]` here has
    // `r < rows` and `c < cols`, which the caller promised are elements of the source and slots of
    // the destination.
    unsafe {
        // Eight source rows at a time, so the lines they share stay in L1 across the staged rows.
        for c0 in (from..cols).step_by(8) {
            for r in 0..rows as isize {
                for c in c0..cols.min(c0 + 8) {
                    *dst.offset(r * p + c as isize) = *src.offset(c as isize * stride + r * step);
                }
            }
        }
    }
}

/// [`transpose_tile`] for elements of `U`'s size: the whole 8x8 blocks by `blocks` (an AVX
/// transpose), then the edge rows and columns one element at a time.
///
/// # Safety
/// As [`transpose_tile`]; `blocks` transposes whole 8x8 blocks, as [`for_blocks`] says.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy<U: Copy>(
    src: *const U,
    stride: isize,
    dst: *mut U,
    p: isize,
    [rows, cols]: [usize; 2],
    blocks: unsafe fn(*const U, isize, *mut U, isize, [usize; 2]),
) {
    // SAFETY: `blocks` gets the whole 8x8 blocks of the caller's shape, and the edges
    // are copied element by element: every position is inside the shape the caller promised, from
    // the same `src` (moved to row `rows8` of the source rows) and `dst` (moved to row `rows8`).
    unsafe {
        let (rows8, cols8) = (rows / 8 * 8, cols / 8 * 8);
        if rows8 > 0 && cols8 > 0 {
            blocks(src, stride, dst, p, [rows8, cols8]);
        }
        // The right edge (all rows), then the bottom one (the columns of whole blocks).
        one_by_one(src, stride, 1, dst, p, [rows, cols], cols8);
        if rows8 < rows {
            let r8 = rows8 as isize;
            let bottom = [rows - rows8, cols8];
            one_by_one(src.offset(r8), stride, 1, dst.offset(r8 * p), p, bottom, 0);
        }
    }
}

/// The row pitch, in elements, of a staged tile of `size`-byte elements: one cache line more
/// than a tile row, so the tile's rows (written down a column, 8 at a time) fall in different
/// L1 sets instead of a few sets of the power-of-two pitch.
pub(super) const fn pitch(size: usize) -> usize {
    TILE + 64 / size
}

/// Calls `block(s, d)` for each `n`x`n` block of a tile, `s` at the block's first source element
/// (source row `c0`, element `r0`) and `d` at its first destination slot (row `r0`, column `c0`).
///
/// # Safety
/// As [`transpose_tile`], with `rows` and `cols` multiples of `n`: then each block lies inside the
/// tile, and `block` may read the `n` elements from `s + k * stride` and write the `n` slots from
/// `d + k * p`, for each `k < n`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn for_blocks<U>(
    n: usize,
    src: *const U,
    stride: isize,
    dst: *mut U,
    p: isize,
    [rows, cols]: [usize; 2],
    mut block: impl FnMut(*const U, *mut U),
) {
    for c0 in (0..cols).step_by(n) {
        for r0 in (0..rows).step_by(n) {
            // SAFETY: `r0 < rows` and `c0 < cols`, so both are positions inside the caller's
            // tile.
            let (s, d) = unsafe {
                let s = src.offset(c0 as isize * stride).add(r0);
                (s, dst.offset(r0 as isize * p + c0 as isize))
            };
            block(s, d);
        }
    }
}

/// Register transposes with AVX (chosen at run time): an 8x8 block of 4-byte elements or a 4x4
/// block of 8-byte elements moves with one load and one store per row.
#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::*;

    /// Generates a register transpose of `$n`x`$n` blocks. Source rows `k` and `k + $n / 2` share
    /// one register, so the 128-bit lane swap is done by the loads (an insert from memory does not
    /// use the shuffle port, which is what bounds a register transpose); `$net` turns the `$n / 2`
    /// registers of one half of the block's columns into as many destination rows.
    macro_rules! tile {
        ($name:ident, $t:ty, $n:literal, $size:literal, [$($k:literal),*], $load:ident, $cast:ident,
         $insert:ident, $store:ident, |$r:ident| $net:expr) => {
            /// # Safety
            #[doc = concat!("As [`super::transpose_tile`] for ", $size, "-byte elements, with `rows` and `cols` multiples of 8, on a CPU with AVX.")]
            #[target_feature(enable = "avx")]
            pub(super) unsafe fn $name(
                src: *const $t,
                stride: isize,
                dst: *mut $t,
                p: isize,
                [rows, cols]: [usize; 2],
            ) {
                // SAFETY: the caller's contract is `for_blocks`'s for n = `$n` (the sides are
                // multiples of 8); each 16-byte load reads `$n / 2` elements of a block's source
                // row k < `$n`, each 32-byte store writes `$n` slots of its destination row
                // `at + j < $n`. The caller checked that the CPU has AVX; the loads and stores are
                // unaligned ones.
                unsafe {
                    super::for_blocks($n, src, stride, dst, p, [rows, cols], |s, d| {
                        let pair = |k: isize, at: usize| {
                            let lo = $load(s.offset(k * stride).add(at));
                            let hi = $load(s.offset((k + $n / 2) * stride).add(at));
                            $insert::<1>($cast(lo), hi)
                        };
                        for half in 0..2 {
                            let at = $n / 2 * half;
                            let $r = [$(pair($k, at)),*];
                            for (j, v) in $net.into_iter().enumerate() {
                                $store(d.offset((at + j) as isize * p), v);
                            }
                        }
                    });
                }
            }
        };
    }

    // Interleave pairs, then quads: lane 0 holds rows 0-3, lane 1 rows 4-7.
    tile! {
        tile_32, f32, 8, "4", [0, 1, 2, 3],
        _mm_loadu_ps, _mm256_castps128_ps256, _mm256_insertf128_ps, _mm256_storeu_ps,
        |r| {
            let (ab0, ab1) = (_mm256_unpacklo_ps(r[0], r[1]), _mm256_unpackhi_ps(r[0], r[1]));
            let (ce0, ce1) = (_mm256_unpacklo_ps(r[2], r[3]), _mm256_unpackhi_ps(r[2], r[3]));
            [
                _mm256_shuffle_ps::<0x44>(ab0, ce0),
                _mm256_shuffle_ps::<0xEE>(ab0, ce0),
                _mm256_shuffle_ps::<0x44>(ab1, ce1),
                _mm256_shuffle_ps::<0xEE>(ab1, ce1),
            ]
        }
    }
    tile! {
        tile_64, f64, 4, "8", [0, 1],
        _mm_loadu_pd, _mm256_castpd128_pd256, _mm256_insertf128_pd, _mm256_storeu_pd,
        |r| [_mm256_unpacklo_pd(r[0], r[1]), _mm256_unpackhi_pd(r[0], r[1])]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Transpose<T> = unsafe fn(*const T, isize, *mut T, isize, [usize; 2]);

    /// Whole blocks: a whole tile, 16 rows (16 source columns) from column 8, and
    /// narrower tiles.
    const WHOLE: [[usize; 3]; 4] = [[TILE, TILE, 0], [16, TILE, 8], [16, 24, 0], [48, 64, 16]];

    /// Shapes with edges (rows or columns not multiples of 8).
    const EDGES: [[usize; 3]; 5] = [[13, 29, 3], [7, 5, 0], [16, 61, 8], [1, 1, 0], [9, TILE, 1]];

    /// Runs `transpose` over `shapes` (`[rows, cols, first source column]`) of `make`'s values,
    /// into rows at the staging pitch and at a pitch of `cols`, each also upwards (a negative
    /// pitch from the last row), and checks every element.
    fn check<T: Copy + PartialEq + std::fmt::Debug>(
        make: impl Fn(usize) -> T,
        transpose: Transpose<T>,
        shapes: &[[usize; 3]],
    ) {
        // Source rows TILE + 3 apart, read from row 1: strides need not be the tile's.
        let sp = TILE + 3;
        let src: Vec<T> = (0..(TILE + 1) * sp).map(&make).collect();
        for &[rows, cols, first] in shapes {
            for (p, up) in [pitch(std::mem::size_of::<T>()), cols]
                .into_iter()
                .flat_map(|p| [(p, false), (p, true)])
            {
                let mut dst = vec![make(0); rows * p];
                // Row r of the copy lands in row r of `dst`, or in row rows - 1 - r upwards.
                let row = |r: usize| if up { rows - 1 - r } else { r };
                // SAFETY: every src[sp + first + c * sp + r] with r < rows + first <= TILE + 8
                // and c < cols <= TILE is inside `src`; `dst` holds `rows` rows of `p` elements,
                // and `to + r * pitch` is the start of one of them for every r < rows.
                unsafe {
                    let from = src.as_ptr().add(sp + first);
                    let to = dst.as_mut_ptr().add(row(0) * p);
                    let pitch = if up { -(p as isize) } else { p as isize };
                    transpose(from, sp as isize, to, pitch, [rows, cols])
                };
                for r in 0..rows {
                    for c in 0..cols {
                        let want = src[sp + first + c * sp + r];
                        assert_eq!(
                            dst[row(r) * p + c],
                            want,
                            "({r}, {c}) of {rows}x{cols}, pitch {p}, upwards {up}"
                        );
                    }
                }
            }
        }
    }

    /// The dispatching entry point, as the engine calls it.
    unsafe fn dispatch<T>(src: *const T, stride: isize, dst: *mut T, p: isize, shape: [usize; 2]) {
        let size = plain_size::<T>().expect("a primitive is plain");
        // SAFETY: as the caller promised, for `T`'s size.
        unsafe { transpose_tile(src.cast(), stride, dst.cast(), p, size, shape) }
    }

    #[test]
    fn tiles_transpose_for_every_plain_size() {
        let shapes = [WHOLE.as_slice(), &EDGES].concat();
        check(|i| i as u8, dispatch, &shapes);
        check(|i| i as i16, dispatch, &shapes);
        check(|i| i as f32, dispatch, &shapes);
        check(|i| i as u32, dispatch, &shapes);
        check(|i| i as f64, dispatch, &shapes);
        check(|i| i as i64, dispatch, &shapes);
        check(|i| i % 3 == 0, dispatch, &shapes);
    }

    /// A stepped source (a transpose sliced with a step, forwards or backwards), staged into
    /// rows at the staging pitch: every element of `shapes` (`[rows, cols]`).
    fn check_stepped<T: Copy + PartialEq + std::fmt::Debug>(
        make: impl Fn(usize) -> T,
        copy: impl Fn(*const T, isize, isize, *mut T, isize, [usize; 2]),
        shapes: &[[usize; 2]],
    ) {
        for step in [2isize, 3, -2, -5, 9] {
            for &[rows, cols] in shapes {
                // Source rows long enough for `rows` elements `step` apart, plus 3 (so the
                // stride is no multiple of anything), read from the end when the step is
                // negative.
                let sp = rows * step.unsigned_abs() + 3;
                let src: Vec<T> = (0..cols * sp).map(&make).collect();
                let first = if step < 0 {
                    (rows - 1) * step.unsigned_abs()
                } else {
                    0
                };
                let p = pitch(std::mem::size_of::<T>());
                let mut dst = vec![make(0); rows * p];
                copy(
                    src[first..].as_ptr(),
                    sp as isize,
                    step,
                    dst.as_mut_ptr(),
                    p as isize,
                    [rows, cols],
                );
                for r in 0..rows {
                    for c in 0..cols {
                        let want = src[(first as isize
                            + c as isize * sp as isize
                            + r as isize * step) as usize];
                        assert_eq!(
                            dst[r * p + c],
                            want,
                            "({r}, {c}) of {rows}x{cols}, step {step}"
                        );
                    }
                }
            }
        }
    }

    /// Whole 8-column groups and edges, rows of any count.
    const STEPPED: [[usize; 2]; 6] = [[16, TILE], [16, 29], [13, 8], [1, 1], [5, 3], [16, 36]];

    #[test]
    fn stepped_copies_for_every_plain_size() {
        fn dispatch<T: Copy>(
            src: *const T,
            stride: isize,
            step: isize,
            dst: *mut T,
            p: isize,
            shape: [usize; 2],
        ) {
            // SAFETY: `check_stepped` passes a source and a buffer that hold the elements read
            // and written.
            unsafe { one_by_one::<T>(src, stride, step, dst, p, shape, 0) }
        }
        check_stepped(|i| i as u8, dispatch, &STEPPED);
        check_stepped(|i| i as i16, dispatch, &STEPPED);
        check_stepped(|i| i as f32, dispatch, &STEPPED);
        check_stepped(|i| i as u32, dispatch, &STEPPED);
        check_stepped(|i| i as f64, dispatch, &STEPPED);
        check_stepped(|i| i as i64, dispatch, &STEPPED);
        check_stepped(|i| i % 3 == 0, dispatch, &STEPPED);
        check_stepped(|i| i as u64, dispatch, &STEPPED);
    }

    #[test]
    fn only_primitives_are_plain() {
        assert_eq!(plain_size::<f32>(), Some(4));
        assert_eq!(plain_size::<usize>(), Some(std::mem::size_of::<usize>()));
        assert_eq!(plain_size::<String>(), None);
        assert_eq!(plain_size::<(f32, f32)>(), None);
        assert_eq!(plain_size::<std::mem::MaybeUninit<f32>>(), None);
        assert_eq!(plain_size::<&'static f32>(), None);
    }
}
