//! Staging a transposed operand. An operand read across its rows (a large stride in the inner
//! loop) costs a cache line per element, and with power-of-two row pitches every such line falls
//! in one L1 set. The engine copies each tile of such an operand, transposed, into a small
//! buffer, reading it along its rows, and then runs the ordinary unit-stride kernels over it.
//! The copy moves bits, so it is only done for the primitive types whose values are their bits.

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

/// Copies `rows` rows (a multiple of 8) of a tile transposed:
/// `dst[r * pitch(size) + c] = src[c * stride + r]` for `r < rows`, `c < TILE`, for elements of
/// `size` bytes (a size [`plain_size`] returned).
///
/// # Safety
/// `src` points at a plain element such that every `src[c * stride + r]` (`r < rows`,
/// `c < TILE`) is an initialised element of the same array; `dst` is valid for
/// `rows * pitch(size)` writes of `size` bytes, aligned for them, and overlaps nothing read.
pub(super) unsafe fn transpose_tile(
    src: *const u8,
    stride: isize,
    dst: *mut u8,
    size: usize,
    rows: usize,
) {
    debug_assert_eq!(rows % 8, 0);
    match size {
        1 => blocks::<u8>(src.cast(), stride, dst.cast(), rows),
        2 => blocks::<u16>(src.cast(), stride, dst.cast(), rows),
        4 => {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx") {
                return avx::tile_32(src.cast(), stride, dst.cast(), rows);
            }
            blocks::<u32>(src.cast(), stride, dst.cast(), rows)
        }
        8 => {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx") {
                return avx::tile_64(src.cast(), stride, dst.cast(), rows);
            }
            blocks::<u64>(src.cast(), stride, dst.cast(), rows)
        }
        _ => unreachable!("plain_size gives 1, 2, 4 or 8 bytes"),
    }
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
/// As [`transpose_tile`], with `U` of the element size.
#[inline(always)]
unsafe fn blocks<U: Copy>(src: *const U, stride: isize, dst: *mut U, rows: usize) {
    const B: usize = 8;
    let p = pitch(size_of::<U>());
    for c0 in (0..TILE).step_by(B) {
        for r0 in (0..rows).step_by(B) {
            for c in c0..c0 + B {
                let row = src.offset(c as isize * stride);
                for r in r0..r0 + B {
                    *dst.add(r * p + c) = *row.add(r);
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

    use super::{pitch, TILE};

    /// # Safety
    /// As [`super::transpose_tile`] for 4-byte elements, on a CPU with AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn tile_32(src: *const f32, stride: isize, dst: *mut f32, rows: usize) {
        const P: usize = pitch(4);
        for c0 in (0..TILE).step_by(8) {
            for r0 in (0..rows).step_by(8) {
                let s = src.offset(c0 as isize * stride).add(r0);
                let row = |k: isize| _mm256_loadu_ps(s.offset(k * stride));
                // Interleave pairs, then quads, then swap 128-bit halves.
                let (a, b) = (row(0), row(1));
                let (c, d) = (row(2), row(3));
                let (e, f) = (row(4), row(5));
                let (g, h) = (row(6), row(7));
                let (ab0, ab1) = (_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
                let (cd0, cd1) = (_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
                let (ef0, ef1) = (_mm256_unpacklo_ps(e, f), _mm256_unpackhi_ps(e, f));
                let (gh0, gh1) = (_mm256_unpacklo_ps(g, h), _mm256_unpackhi_ps(g, h));
                let q = [
                    _mm256_shuffle_ps::<0x44>(ab0, cd0),
                    _mm256_shuffle_ps::<0xEE>(ab0, cd0),
                    _mm256_shuffle_ps::<0x44>(ab1, cd1),
                    _mm256_shuffle_ps::<0xEE>(ab1, cd1),
                ];
                let p = [
                    _mm256_shuffle_ps::<0x44>(ef0, gh0),
                    _mm256_shuffle_ps::<0xEE>(ef0, gh0),
                    _mm256_shuffle_ps::<0x44>(ef1, gh1),
                    _mm256_shuffle_ps::<0xEE>(ef1, gh1),
                ];
                let d = dst.add(r0 * P + c0);
                for k in 0..4 {
                    _mm256_storeu_ps(d.add(k * P), _mm256_permute2f128_ps::<0x20>(q[k], p[k]));
                    _mm256_storeu_ps(
                        d.add((k + 4) * P),
                        _mm256_permute2f128_ps::<0x31>(q[k], p[k]),
                    );
                }
            }
        }
    }

    /// # Safety
    /// As [`super::transpose_tile`] for 8-byte elements, on a CPU with AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn tile_64(src: *const f64, stride: isize, dst: *mut f64, rows: usize) {
        const P: usize = pitch(8);
        for c0 in (0..TILE).step_by(4) {
            for r0 in (0..rows).step_by(4) {
                let s = src.offset(c0 as isize * stride).add(r0);
                let row = |k: isize| _mm256_loadu_pd(s.offset(k * stride));
                let (a, b, c, e) = (row(0), row(1), row(2), row(3));
                let (ab0, ab1) = (_mm256_unpacklo_pd(a, b), _mm256_unpackhi_pd(a, b));
                let (ce0, ce1) = (_mm256_unpacklo_pd(c, e), _mm256_unpackhi_pd(c, e));
                let d = dst.add(r0 * P + c0);
                _mm256_storeu_pd(d, _mm256_permute2f128_pd::<0x20>(ab0, ce0));
                _mm256_storeu_pd(d.add(P), _mm256_permute2f128_pd::<0x20>(ab1, ce1));
                _mm256_storeu_pd(d.add(2 * P), _mm256_permute2f128_pd::<0x31>(ab0, ce0));
                _mm256_storeu_pd(d.add(3 * P), _mm256_permute2f128_pd::<0x31>(ab1, ce1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `transpose` over a tile of `make`'s values and checks every element.
    fn check<T: Copy + PartialEq + std::fmt::Debug>(
        make: impl Fn(usize) -> T,
        transpose: unsafe fn(*const T, isize, *mut T, usize),
    ) {
        // Source rows TILE + 3 apart, read from row 1: strides need not be the tile's.
        let sp = TILE + 3;
        let src: Vec<T> = (0..(TILE + 1) * sp).map(&make).collect();
        let p = pitch(std::mem::size_of::<T>());
        // A whole tile, and a slab of 16 rows (16 source columns) from column 8.
        for (rows, first) in [(TILE, 0), (16, 8)] {
            let mut dst = vec![make(0); rows * p];
            // SAFETY: every src[sp + first + c * sp + r] with r < rows + first <= TILE + 8 and
            // c < TILE is inside `src`; `dst` holds `rows` rows of `p` elements of T.
            unsafe {
                let from = src.as_ptr().add(sp + first);
                transpose(from, sp as isize, dst.as_mut_ptr(), rows)
            };
            for r in 0..rows {
                for c in 0..TILE {
                    let want = src[sp + first + c * sp + r];
                    assert_eq!(dst[r * p + c], want, "({r}, {c}) of {rows}");
                }
            }
        }
    }

    /// The dispatching entry point, as the engine calls it.
    unsafe fn dispatch<T>(src: *const T, stride: isize, dst: *mut T, rows: usize) {
        let size = plain_size::<T>().expect("a primitive is plain");
        transpose_tile(src.cast(), stride, dst.cast(), size, rows)
    }

    #[test]
    fn tiles_transpose_for_every_plain_size() {
        check(|i| i as u8, dispatch);
        check(|i| i as i16, dispatch);
        check(|i| i as f32, dispatch);
        check(|i| i as u32, dispatch);
        check(|i| i as f64, dispatch);
        check(|i| i as i64, dispatch);
        check(|i| i % 3 == 0, dispatch);
    }

    #[test]
    fn portable_blocks_transpose_wide_elements() {
        // On a CPU with AVX the dispatch above never reaches these.
        check(|i| i as u32, blocks::<u32>);
        check(|i| i as u64, blocks::<u64>);
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
