//! Staging a transposed operand. An operand read across its rows (a large stride in the inner
//! loop) costs a cache line per element and a scalar load each, which no compiler vectorises,
//! and with power-of-two row pitches every such line falls in one L1 set. The engine copies a
//! slab of such an operand at a time, transposed, into a small buffer, reading it along its
//! rows, and then runs the ordinary unit-stride kernels over it. The copy moves bits, so it is
//! only done for the primitive types whose values are their bits.

use std::any::TypeId;

use super::plan::TILE;

/// The element size of `T` when its values may be copied as raw bits (a primitive number or
/// `bool`: no padding, no drop, no interior mutability), else `None`.
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
    plain.contains(&id).then_some(std::mem::size_of::<T>())
}

/// Copies `shape = [rows, cols]` (`cols <= |pitch|`), transposed into rows `pitch` elements
/// apart: `dst[r * pitch + c] = src[c * stride + r]` for `r < rows`, `c < cols`, for elements
/// of `size` bytes (a size [`plain_size`] returned). A negative `pitch` writes the rows upwards
/// from `dst` (how a source read backwards along its rows lands in order). Whole 8x8 blocks go
/// through the register transposes; the edges of a shape that is not a multiple of 8 are
/// copied one by one.
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
    debug_assert!(shape[1] <= pitch.unsigned_abs());
    match size {
        1 => copy::<u8>(src.cast(), stride, dst.cast(), pitch, shape, blocks::<u8>),
        2 => copy::<u16>(src.cast(), stride, dst.cast(), pitch, shape, blocks::<u16>),
        4 => {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx") {
                return copy::<f32>(src.cast(), stride, dst.cast(), pitch, shape, avx::tile_32);
            }
            copy::<u32>(src.cast(), stride, dst.cast(), pitch, shape, blocks::<u32>)
        }
        8 => {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx") {
                return copy::<f64>(src.cast(), stride, dst.cast(), pitch, shape, avx::tile_64);
            }
            copy::<u64>(src.cast(), stride, dst.cast(), pitch, shape, blocks::<u64>)
        }
        _ => unreachable!("plain_size gives 1, 2, 4 or 8 bytes"),
    }
}

/// [`transpose_tile`] for elements of `U`'s size: the whole 8x8 blocks by `blocks`, then the
/// edge rows and columns one element at a time.
///
/// # Safety
/// As [`transpose_tile`]; `blocks` has the contract of [`blocks`] for `U`.
#[inline(always)]
unsafe fn copy<U: Copy>(
    src: *const U,
    stride: isize,
    dst: *mut U,
    p: isize,
    [rows, cols]: [usize; 2],
    blocks: unsafe fn(*const U, isize, *mut U, isize, [usize; 2]),
) {
    let (rows8, cols8) = (rows / 8 * 8, cols / 8 * 8);
    if rows8 > 0 && cols8 > 0 {
        blocks(src, stride, dst, p, [rows8, cols8]);
    }
    // Columns `cs` by rows `rs`, element by element (an empty `rs` skips the columns).
    let one_by_one = |cs: std::ops::Range<usize>, rs: std::ops::Range<usize>| {
        if rs.is_empty() {
            return;
        }
        for c in cs {
            let row = src.offset(c as isize * stride);
            for r in rs.clone() {
                *dst.offset(r as isize * p + c as isize) = *row.add(r);
            }
        }
    };
    // The right edge (all rows), then the bottom one (the columns of whole blocks).
    one_by_one(cols8..cols, 0..rows);
    one_by_one(0..cols8, rows8..rows);
}

/// The row pitch, in elements, of a staged tile of `size`-byte elements: one cache line more
/// than a tile row, so the tile's rows (written down a column, 8 at a time) fall in different
/// L1 sets instead of a few sets of the power-of-two pitch.
pub(super) const fn pitch(size: usize) -> usize {
    TILE + 64 / size
}

/// The portable transpose: 8x8 blocks, each read as eight short runs along source rows, so the
/// eight lines a block touches stay in L1 while the block is written.
///
/// # Safety
/// As [`transpose_tile`], with `U` of the element size and `rows` and `cols` multiples of 8.
unsafe fn blocks<U: Copy>(
    src: *const U,
    stride: isize,
    dst: *mut U,
    p: isize,
    [rows, cols]: [usize; 2],
) {
    const B: usize = 8;
    for c0 in (0..cols).step_by(B) {
        for r0 in (0..rows).step_by(B) {
            for c in c0..c0 + B {
                let row = src.offset(c as isize * stride);
                for r in r0..r0 + B {
                    *dst.offset(r as isize * p + c as isize) = *row.add(r);
                }
            }
        }
    }
}

/// Register transposes with AVX (chosen at run time): an 8x8 block of 4-byte elements or a 4x4
/// block of 8-byte elements moves with one load and one store per row.
#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::*;

    /// # Safety
    /// As [`super::transpose_tile`] for 4-byte elements, with `rows` and `cols` multiples of 8,
    /// on a CPU with AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn tile_32(
        src: *const f32,
        stride: isize,
        dst: *mut f32,
        p: isize,
        [rows, cols]: [usize; 2],
    ) {
        for c0 in (0..cols).step_by(8) {
            for r0 in (0..rows).step_by(8) {
                let s = src.offset(c0 as isize * stride).add(r0);
                // Source rows k and k + 4, elements `at..at + 4` of each, in one register: the
                // 128-bit lane swap is done by the loads (an insert from memory does not use the
                // shuffle port, which is what bounds a register transpose).
                let pair = |k: isize, at: usize| {
                    let lo = _mm_loadu_ps(s.offset(k * stride).add(at));
                    let hi = _mm_loadu_ps(s.offset((k + 4) * stride).add(at));
                    _mm256_insertf128_ps::<1>(_mm256_castps128_ps256(lo), hi)
                };
                let d = dst.offset(r0 as isize * p + c0 as isize);
                for half in 0..2 {
                    let at = 4 * half;
                    let (a, b, c, e) = (pair(0, at), pair(1, at), pair(2, at), pair(3, at));
                    // Interleave pairs, then quads: lane 0 holds rows 0-3, lane 1 rows 4-7.
                    let (ab0, ab1) = (_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
                    let (ce0, ce1) = (_mm256_unpacklo_ps(c, e), _mm256_unpackhi_ps(c, e));
                    let out = [
                        _mm256_shuffle_ps::<0x44>(ab0, ce0),
                        _mm256_shuffle_ps::<0xEE>(ab0, ce0),
                        _mm256_shuffle_ps::<0x44>(ab1, ce1),
                        _mm256_shuffle_ps::<0xEE>(ab1, ce1),
                    ];
                    for (j, v) in out.into_iter().enumerate() {
                        _mm256_storeu_ps(d.offset((at + j) as isize * p), v);
                    }
                }
            }
        }
    }

    /// # Safety
    /// As [`super::transpose_tile`] for 8-byte elements, with `rows` and `cols` multiples of 8,
    /// on a CPU with AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn tile_64(
        src: *const f64,
        stride: isize,
        dst: *mut f64,
        p: isize,
        [rows, cols]: [usize; 2],
    ) {
        for c0 in (0..cols).step_by(4) {
            for r0 in (0..rows).step_by(4) {
                let s = src.offset(c0 as isize * stride).add(r0);
                // Source rows k and k + 2, elements `at..at + 2` of each, in one register (see
                // `tile_32`).
                let pair = |k: isize, at: usize| {
                    let lo = _mm_loadu_pd(s.offset(k * stride).add(at));
                    let hi = _mm_loadu_pd(s.offset((k + 2) * stride).add(at));
                    _mm256_insertf128_pd::<1>(_mm256_castpd128_pd256(lo), hi)
                };
                let d = dst.offset(r0 as isize * p + c0 as isize);
                for half in 0..2 {
                    let at = 2 * half;
                    let (a, b) = (pair(0, at), pair(1, at));
                    _mm256_storeu_pd(d.offset(at as isize * p), _mm256_unpacklo_pd(a, b));
                    _mm256_storeu_pd(d.offset((at + 1) as isize * p), _mm256_unpackhi_pd(a, b));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Transpose<T> = unsafe fn(*const T, isize, *mut T, isize, [usize; 2]);

    /// Whole blocks: a whole tile, a slab of 16 rows (16 source columns) from column 8, and
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
        transpose_tile(src.cast(), stride, dst.cast(), p, size, shape)
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

    #[test]
    fn portable_blocks_transpose_wide_elements() {
        // On a CPU with AVX the dispatch above never reaches these.
        check(|i| i as u32, blocks::<u32>, &WHOLE);
        check(|i| i as u64, blocks::<u64>, &WHOLE);
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
