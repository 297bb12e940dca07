//! Element types and tensors: how XLA names each element type, the concrete arrays a program
//! takes and gives ([`Tensor`], [`TensorView`]), and the kernels of each type looked up by its
//! StableHLO type.

use ndarray::ArrayD;

use super::eval::{self, Kernels};
use super::{type_error, Binary, Direction, Reduction, Unary};
use crate::element::XlaElement;
use crate::engine::reduce::FoldFn;
use crate::engine::table::{self, Kernel, Run};
use crate::engine::{Blank, Operand, Src};
use crate::error::{BroadcastError, Result};
use crate::shape::iota;

/// How XLA sees an element type: its name in StableHLO and its kind.
///
/// ```
/// use xla_bcast::stablehlo::{Kind, Program};
///
/// let mut p = Program::new("t");
/// let x = p.parameter::<i16>(&[2]);
/// let ty = p.element_type(x).unwrap();
/// assert_eq!((ty.name, ty.kind), ("i16", Kind::Signed));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementType {
    /// The StableHLO name: `f32`, `i64`, `ui8`, `i1`, `complex<f32>`, ...
    pub name: &'static str,
    /// What it is.
    pub kind: Kind,
}

/// The kind of an element type, which decides the ops it has and how it compares.
///
/// ```
/// use xla_bcast::stablehlo::{Kind, Program};
///
/// let mut p = Program::new("k");
/// let b = p.parameter::<bool>(&[1]);
/// assert_eq!(p.element_type(b).unwrap().kind, Kind::Pred);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `bool` (`i1`, XLA's `PRED`).
    Pred,
    /// Signed integers.
    Signed,
    /// Unsigned integers.
    Unsigned,
    /// Real floats.
    Float,
    /// Complex numbers.
    Complex,
}

/// The literals of each kind of element, exact: floats as bit patterns.
macro_rules! literal {
    (int) => {
        fn literal(self) -> String {
            self.to_string()
        }
    };
    (bits $w:literal) => {
        fn literal(self) -> String {
            format!("0x{:0w$X}", self.to_bits(), w = $w)
        }
    };
    (complex) => {
        fn literal(self) -> String {
            format!("({:?}, {:?})", self.re, self.im)
        }
    };
}

/// `element_type`, `shape` and `strides` of the tensor enum `$e` (the type `$self_ty`), whose
/// examples make `t`, a `[[1.5f64, 2.0]]`, as `$make` says.
macro_rules! accessors {
    ($self_ty:ty, $e:ident, $make:literal; $($(#[$cfg:meta])* $variant:ident: $t:ty),*) => {
        impl $self_ty {
            /// Its element type.
            ///
            /// ```
            #[doc = concat!("use xla_bcast::stablehlo::", stringify!($e), ";")]
            #[doc = $make]
            /// assert_eq!(t.element_type().name, "f64");
            /// ```
            pub fn element_type(&self) -> ElementType {
                match self {
                    $($(#[$cfg])* $e::$variant(_) => <$t as StableHloElement>::TYPE,)*
                }
            }

            /// Its shape.
            ///
            /// ```
            #[doc = concat!("use xla_bcast::stablehlo::", stringify!($e), ";")]
            #[doc = $make]
            /// assert_eq!(t.shape(), &[1, 2]);
            /// ```
            pub fn shape(&self) -> &[usize] {
                match self {
                    $($(#[$cfg])* $e::$variant(a) => a.shape(),)*
                }
            }

            /// Its strides, in elements.
            pub(super) fn strides(&self) -> &[isize] {
                match self {
                    $($(#[$cfg])* $e::$variant(a) => a.strides(),)*
                }
            }
        }
    };
}

macro_rules! tensor_types {
    ($($(#[$cfg:meta])* $variant:ident: $t:ty, $name:literal, $kind:ident, $lit:tt;)*) => {
        /// A concrete array of any element type a [`Program`](super::Program) takes or gives.
        ///
        /// ```
        /// use ndarray::{array, ArrayD};
        /// use xla_bcast::stablehlo::Tensor;
        ///
        /// let t = Tensor::from(array![[1.0f32, 2.0]].into_dyn()); // in: any ArrayD of an element type
        /// assert!(matches!(t, Tensor::F32(_)));
        /// let back = ArrayD::<f32>::try_from(t).unwrap(); // out: the array, no copy
        /// assert_eq!(back.shape(), &[1, 2]);
        /// ```
        #[derive(Debug, Clone, PartialEq)]
        pub enum Tensor {
            $(
                $(#[$cfg])*
                #[doc = concat!("`", stringify!($t), "` (`", $name, "`).")]
                $variant(ArrayD<$t>),
            )*
        }

        impl Unwritten {
            /// The tensor, written.
            ///
            /// # Safety
            /// Every element was written.
            pub(super) unsafe fn assume_init(self) -> Tensor {
                let Unwritten { ty, blank } = self;
                $(
                    $(#[$cfg])*
                    if ty == <$t as StableHloElement>::TYPE {
                        // SAFETY: a blank made for this type, written, as the caller promised.
                        return Tensor::$variant(unsafe { blank.assume_init::<$t>() });
                    }
                )*
                unreachable!("every element type is a tensor's")
            }
        }

        /// A borrowed array of any element type a [`Program`](super::Program) takes: what
        /// [`Executable::run_views`](super::Executable::run_views) reads where it lies,
        /// without a copy. Made from any ndarray array or view of an element type a program
        /// has (`TensorView::from(&x)`, `x.view().into()`), or from a [`Tensor`].
        ///
        /// ```
        /// use ndarray::array;
        /// use xla_bcast::stablehlo::{Tensor, TensorView};
        ///
        /// let x = array![[1.0f32, 2.0], [3.0, 4.0]];
        /// let v = TensorView::from(&x);
        /// assert_eq!(v.shape(), &[2, 2]);
        /// assert_eq!(v.element_type().name, "f32");
        /// assert_eq!(v.to_tensor(), Tensor::from(x.into_dyn()));
        /// ```
        #[derive(Debug, Clone)]
        pub enum TensorView<'a> {
            $(
                $(#[$cfg])*
                #[doc = concat!("`", stringify!($t), "` (`", $name, "`).")]
                $variant(ndarray::ArrayViewD<'a, $t>),
            )*
        }

        /// A mutable view of any element type a [`Program`](super::Program) gives: an array of
        /// the caller's that [`Executable::run_into`](super::Executable::run_into) writes an
        /// output into, of any dimension type and layout. Made from `&mut` any ndarray array or
        /// view (`TensorViewMut::from(&mut y)`, `y.view_mut().into()`), or from a [`Tensor`]
        /// ([`Tensor::view_mut`]).
        ///
        /// ```
        /// use ndarray::Array2;
        /// use xla_bcast::stablehlo::TensorViewMut;
        ///
        /// let mut y = Array2::<f32>::zeros((2, 3));
        /// let v = TensorViewMut::from(&mut y);
        /// assert_eq!((v.shape(), v.element_type().name), (&[2, 3][..], "f32"));
        /// ```
        #[derive(Debug)]
        pub enum TensorViewMut<'a> {
            $(
                $(#[$cfg])*
                #[doc = concat!("`", stringify!($t), "` (`", $name, "`).")]
                $variant(ndarray::ArrayViewMutD<'a, $t>),
            )*
        }

        accessors!(Tensor, Tensor, "let t = Tensor::from(ndarray::array![[1.5f64, 2.0]]);";
            $($(#[$cfg])* $variant: $t),*);
        accessors!(TensorView<'_>, TensorView, "let a = ndarray::array![[1.5f64, 2.0]];\nlet t = TensorView::from(&a);";
            $($(#[$cfg])* $variant: $t),*);
        accessors!(TensorViewMut<'_>, TensorViewMut, "let mut a = ndarray::array![[1.5f64, 2.0]];\nlet t = TensorViewMut::from(&mut a);";
            $($(#[$cfg])* $variant: $t),*);

        impl<'a> TensorViewMut<'a> {
            /// The same view, for a shorter lifetime.
            ///
            /// ```
            /// use xla_bcast::stablehlo::TensorViewMut;
            /// let mut y = ndarray::array![1i8, 2];
            /// let mut v = TensorViewMut::from(&mut y);
            /// assert_eq!(v.view_mut().shape(), &[2]);
            /// ```
            pub fn view_mut(&mut self) -> TensorViewMut<'_> {
                match self {
                    $($(#[$cfg])* TensorViewMut::$variant(a) => TensorViewMut::$variant(a.view_mut()),)*
                }
            }

            /// The array, as an operand to write at its own shape.
            pub(super) fn output(&mut self) -> Operand<'_> {
                match self {
                    $($(#[$cfg])* TensorViewMut::$variant(a) => Operand::output(a),)*
                }
            }

            /// The view, read-only from now on, for as long as it was lent.
            pub(super) fn into_read(self) -> TensorView<'a> {
                match self {
                    $($(#[$cfg])* TensorViewMut::$variant(a) => {
                        let raw = a.raw_view();
                        // SAFETY: `a`, the one view of these elements for `'a`, is consumed
                        // here: its exclusive borrow becomes this shared one, which nothing
                        // writes through.
                        TensorView::$variant(unsafe { raw.deref_into_view() })
                    })*
                }
            }
        }

        impl Tensor {
            /// A mutable view of the array inside, for
            /// [`Executable::run_into`](super::Executable::run_into).
            ///
            /// ```
            /// use xla_bcast::stablehlo::Tensor;
            /// let mut t = Tensor::from(ndarray::array![1u8, 2]);
            /// assert_eq!(t.view_mut().shape(), &[2]);
            /// ```
            pub fn view_mut(&mut self) -> TensorViewMut<'_> {
                match self {
                    $($(#[$cfg])* Tensor::$variant(a) => TensorViewMut::$variant(a.view_mut()),)*
                }
            }

            /// All its elements as StableHLO literals, in row-major order.
            pub(super) fn literals(&self) -> Vec<String> {
                match self {
                    $($(#[$cfg])* Tensor::$variant(a) => a.iter().map(|v| v.literal()).collect(),)*
                }
            }

            /// The one element of a rank-0 tensor, as a StableHLO literal.
            pub(super) fn visit_literal(&self) -> String {
                match self {
                    $($(#[$cfg])* Tensor::$variant(a) => a.first().map_or(String::new(), |v| v.literal()),)*
                }
            }

            /// A pointer to its first element (a rank-0 tensor's one element).
            pub(super) fn first_element(&self) -> *const u8 {
                match self {
                    $($(#[$cfg])* Tensor::$variant(a) => a.as_ptr().cast(),)*
                }
            }

            /// This array seen at `shape`, its dim `i` at `dims[i]`: the rule's error when that
            /// does not place it.
            pub(super) fn placed<'a>(&'a self, op: &'static str, shape: &'a [usize], dims: &[usize]) -> Result<Operand<'a>> {
                match self {
                    $($(#[$cfg])* Tensor::$variant(a) => Src::placed(op, a, shape, dims).map(Src::into_operand),)*
                }
            }

            /// The identity of reduction `r` for elements of type `ty`, as a rank-0 tensor.
            pub(super) fn identity(ty: ElementType, r: Reduction) -> Option<Tensor> {
                $(
                    $(#[$cfg])*
                    if ty == <$t as StableHloElement>::TYPE {
                        let (_, identity) = <$t as Kernels>::fold(r)?;
                        return Some(Tensor::$variant(ndarray::arr0(identity).into_dyn()));
                    }
                )*
                None
            }

            /// `kernel` over `inputs`, seen at `shape`, into a fresh tensor of type `ty`.
            ///
            /// # Safety
            /// As [`table::collect`], for an output of type `ty`.
            pub(super) unsafe fn collect_as(
                ty: ElementType,
                op: &'static str,
                shape: &[usize],
                kernel: impl Into<Kernel>,
                inputs: &[&Operand<'_>],
            ) -> Result<Tensor> {
                // SAFETY: as the caller promised; every element type of a tensor is plain.
                let blank = unsafe { table::collect(op, ty.layout(), shape, kernel.into(), inputs) }?;
                // SAFETY: the chain wrote every element, of type `ty`.
                Ok(unsafe { Unwritten { ty, blank }.assume_init() })
            }

            /// The array inside, as an operand to write at its own shape.
            pub(super) fn output(&mut self) -> Operand<'_> {
                match self {
                    $($(#[$cfg])* Tensor::$variant(a) => Operand::output(a),)*
                }
            }

            /// A view of the array inside, of its element type.
            pub(super) fn read(&self) -> TensorView<'_> {
                match self {
                    $($(#[$cfg])* Tensor::$variant(a) => TensorView::$variant(a.view()),)*
                }
            }
        }

        impl TensorView<'_> {
            /// The elements, copied into an owned [`Tensor`] (in the standard layout).
            ///
            /// ```
            /// use xla_bcast::stablehlo::{StableHloElement, Tensor, TensorView};
            /// let x = ndarray::array![[1, 2], [3, 4]];
            /// let t = TensorView::from(x.t()).to_tensor();
            /// assert_eq!(t, Tensor::from(x.t().to_owned().into_dyn()));
            /// assert!(i32::of(&t).unwrap().is_standard_layout());
            /// ```
            ///
            /// # Panics
            /// Where the copy cannot be allocated (where ndarray's `to_owned` aborts).
            pub fn to_tensor(&self) -> Tensor {
                match self.copied("to_tensor") {
                    Ok(t) => t,
                    Err(e) => panic!("{e}"),
                }
            }

            /// The same view, for a shorter lifetime.
            pub(super) fn reborrow<'b>(&self) -> TensorView<'b>
            where
                Self: 'b,
            {
                match self {
                    $($(#[$cfg])* TensorView::$variant(a) => TensorView::$variant(a.clone().reborrow()),)*
                }
            }

            /// This array seen at `shape`, its dim `i` at `dims[i]`: the rule's error when that
            /// does not place it.
            pub(super) fn placed<'a>(&'a self, op: &'static str, shape: &'a [usize], dims: &[usize]) -> Result<Operand<'a>> {
                match self {
                    $($(#[$cfg])* TensorView::$variant(a) => Src::placed(op, a, shape, dims).map(Src::into_operand),)*
                }
            }

            /// `argmin` (`argmax` with `max`) over the dims but `kept` ([`Kernels::arg`]).
            pub(super) fn arg_extreme(&self, op: &'static str, kept: &[usize], max: bool) -> Option<Result<ArrayD<usize>>> {
                match self {
                    $($(#[$cfg])* TensorView::$variant(a) => <$t as Kernels>::arg(op, a.view(), kept, max),)*
                }
            }
        }

        /// The kernels of each element type, looked up by its StableHLO type.
        impl ElementType {
            /// The bytes of one element.
            pub(super) fn size(self) -> usize {
                self.layout().0
            }

            /// The bytes of one element and their alignment.
            pub(super) fn layout(self) -> (usize, usize) {
                $($(#[$cfg])* if self == <$t as StableHloElement>::TYPE { return (size_of::<$t>(), align_of::<$t>()); })*
                unreachable!("every element type is a tensor's")
            }

            /// `op`'s kernel for this element type.
            pub(super) fn binary_kernel(self, op: Binary) -> Option<Run<3>> {
                $($(#[$cfg])* if self == <$t as StableHloElement>::TYPE { return <$t as Kernels>::binary(op); })*
                None
            }

            /// The comparison's kernel for this element type.
            pub(super) fn compare_kernel(self, dir: Direction) -> Option<Run<3>> {
                $($(#[$cfg])* if self == <$t as StableHloElement>::TYPE { return <$t as Kernels>::compare(dir); })*
                None
            }

            /// `clamp`'s kernel for this element type.
            pub(super) fn clamp_kernel(self) -> Option<Run<4>> {
                $($(#[$cfg])* if self == <$t as StableHloElement>::TYPE { return <$t as Kernels>::clamp(); })*
                None
            }

            /// `op`'s kernel for this element type.
            pub(super) fn unary_kernel(self, op: Unary) -> Option<Run<2>> {
                $($(#[$cfg])* if self == <$t as StableHloElement>::TYPE { return <$t as Kernels>::unary(op); })*
                None
            }

            /// The fold of reduction `r` for this element type ([`Kernels::fold`]).
            pub(super) fn fold_kernel(self, r: Reduction) -> Option<FoldFn> {
                $($(#[$cfg])* if self == <$t as StableHloElement>::TYPE { return <$t as Kernels>::fold(r).map(|(run, _)| run); })*
                None
            }

            /// The conversion kernel from this element type to `to`.
            pub(super) fn convert_kernel(self, to: ElementType) -> Option<Run<2>> {
                $($(#[$cfg])* if self == <$t as StableHloElement>::TYPE { return eval::convert_kernel::<$t>(to); })*
                None
            }
        }

        $(
            $(#[$cfg])*
            impl sealed::Sealed for $t {}

            $(#[$cfg])*
            impl StableHloElement for $t {
                const TYPE: ElementType = ElementType { name: $name, kind: Kind::$kind };
                literal!$lit;
                fn of(t: &Tensor) -> Option<&ArrayD<Self>> {
                    match t {
                        Tensor::$variant(a) => Some(a),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
            }

            $(#[$cfg])*
            impl<D: ndarray::Dimension> From<ndarray::Array<$t, D>> for Tensor {
                fn from(a: ndarray::Array<$t, D>) -> Tensor {
                    Tensor::$variant(a.into_dyn())
                }
            }

            $(#[$cfg])*
            /// A copy of the view's elements.
            impl<D: ndarray::Dimension> From<ndarray::ArrayView<'_, $t, D>> for Tensor {
                fn from(a: ndarray::ArrayView<'_, $t, D>) -> Tensor {
                    Tensor::$variant(a.to_owned().into_dyn())
                }
            }

            $(#[$cfg])*
            impl<'a, D: ndarray::Dimension> From<ndarray::ArrayViewMut<'a, $t, D>> for TensorViewMut<'a> {
                fn from(a: ndarray::ArrayViewMut<'a, $t, D>) -> TensorViewMut<'a> {
                    TensorViewMut::$variant(a.into_dyn())
                }
            }

            $(#[$cfg])*
            impl<'a, D: ndarray::Dimension> From<&'a mut ndarray::Array<$t, D>> for TensorViewMut<'a> {
                fn from(a: &'a mut ndarray::Array<$t, D>) -> TensorViewMut<'a> {
                    TensorViewMut::$variant(a.view_mut().into_dyn())
                }
            }

            $(#[$cfg])*
            impl<'a, D: ndarray::Dimension> From<&'a mut ndarray::ArrayRef<$t, D>> for TensorViewMut<'a> {
                fn from(a: &'a mut ndarray::ArrayRef<$t, D>) -> TensorViewMut<'a> {
                    TensorViewMut::$variant(a.view_mut().into_dyn())
                }
            }

            $(#[$cfg])*
            impl<'a, D: ndarray::Dimension> From<ndarray::ArrayView<'a, $t, D>> for TensorView<'a> {
                fn from(a: ndarray::ArrayView<'a, $t, D>) -> TensorView<'a> {
                    TensorView::$variant(a.into_dyn())
                }
            }

            $(#[$cfg])*
            impl<'a, D: ndarray::Dimension> From<&'a ndarray::Array<$t, D>> for TensorView<'a> {
                fn from(a: &'a ndarray::Array<$t, D>) -> TensorView<'a> {
                    TensorView::$variant(a.view().into_dyn())
                }
            }

            $(#[$cfg])*
            impl<'a, D: ndarray::Dimension> From<&'a ndarray::ArrayRef<$t, D>> for TensorView<'a> {
                fn from(a: &'a ndarray::ArrayRef<$t, D>) -> TensorView<'a> {
                    TensorView::$variant(a.view().into_dyn())
                }
            }

            $(#[$cfg])*
            #[doc = concat!("The `", stringify!($t), "` array inside a tensor, without a copy; [`BroadcastError::ElementType`] naming both types when the tensor holds another.")]
            impl TryFrom<Tensor> for ArrayD<$t> {
                type Error = BroadcastError;
                fn try_from(t: Tensor) -> Result<ArrayD<$t>> {
                    match t {
                        Tensor::$variant(a) => Ok(a),
                        #[allow(unreachable_patterns)]
                        other => Err(BroadcastError::ElementType {
                            op: "try_from",
                            types: other.element_type().name.to_string(),
                            reason: format!(
                                "the tensor holds {}, not {}",
                                other.element_type().name,
                                $name
                            ),
                        }),
                    }
                }
            }
        )*
    };
}

tensor_types! {
    Pred: bool, "i1", Pred, (int);
    I8: i8, "i8", Signed, (int);
    I16: i16, "i16", Signed, (int);
    I32: i32, "i32", Signed, (int);
    I64: i64, "i64", Signed, (int);
    U8: u8, "ui8", Unsigned, (int);
    U16: u16, "ui16", Unsigned, (int);
    U32: u32, "ui32", Unsigned, (int);
    U64: u64, "ui64", Unsigned, (int);
    F32: f32, "f32", Float, (bits 8);
    F64: f64, "f64", Float, (bits 16);
    #[cfg(feature = "half")]
    F16: half::f16, "f16", Float, (bits 4);
    #[cfg(feature = "half")]
    Bf16: half::bf16, "bf16", Float, (bits 4);
    #[cfg(feature = "complex")]
    C64: num_complex::Complex<f32>, "complex<f32>", Complex, (complex);
    #[cfg(feature = "complex")]
    C128: num_complex::Complex<f64>, "complex<f64>", Complex, (complex);
}

impl Tensor {
    /// The array inside as a view of `T`, or `None` when the tensor holds another type (see
    /// [`Tensor::element_type`]); [`ArrayD::try_from`] takes the array out.
    ///
    /// ```
    /// use ndarray::{array, ArrayD};
    /// use xla_bcast::stablehlo::Tensor;
    ///
    /// let t = Tensor::from(array![[1.0f32, 2.0], [3.0, 4.0]].into_dyn());
    /// assert_eq!(t.view::<f32>().unwrap()[[1, 0]], 3.0);
    /// assert!(t.view::<f64>().is_none());
    /// let a = ArrayD::<f32>::try_from(t).unwrap();
    /// assert_eq!(a.shape(), &[2, 2]);
    /// let err = ArrayD::<i32>::try_from(Tensor::from(array![1u8].into_dyn())).unwrap_err();
    /// assert_eq!(err.to_string(), "try_from: element types ui8: the tensor holds ui8, not i32");
    /// ```
    pub fn view<T: StableHloElement>(&self) -> Option<ndarray::ArrayViewD<'_, T>> {
        T::of(self).map(|a| a.view())
    }

    /// The array inside at a fixed dimension type, without a copy: [`BroadcastError::ElementType`]
    /// when the tensor holds another type, [`BroadcastError::ResultRank`] when its rank is not
    /// `D`'s.
    ///
    /// ```
    /// use ndarray::{array, Array2};
    /// use xla_bcast::stablehlo::Tensor;
    ///
    /// let t = Tensor::from(array![[1.0f32, 2.0]]);
    /// let a: Array2<f32> = t.clone().into_array().unwrap();
    /// assert_eq!(a, array![[1.0, 2.0]]);
    /// assert!(t.into_array::<f32, ndarray::Ix1>().is_err()); // rank 2
    /// ```
    pub fn into_array<T: StableHloElement, D: ndarray::Dimension>(
        self,
    ) -> Result<ndarray::Array<T, D>>
    where
        ArrayD<T>: TryFrom<Tensor, Error = BroadcastError>,
    {
        crate::front::into_dim("into_array", ArrayD::<T>::try_from(self)?)
    }
}

/// A tensor's array, read where it lies.
impl<'a> From<&'a Tensor> for TensorView<'a> {
    fn from(t: &'a Tensor) -> TensorView<'a> {
        t.read()
    }
}

impl TensorViewMut<'_> {
    /// `src`'s elements into this view, of the same type and shape, through the engine's
    /// copy of their size.
    pub(super) fn assign_from(&mut self, op: &'static str, src: &Held<'_>) -> Result<()> {
        crate::front::check_out(op, src.shape(), self.shape())?;
        if self.element_type() != src.element_type() {
            let reason = "an output of another type than the program's";
            return Err(type_error(
                op,
                &[self.element_type(), src.element_type()],
                reason,
            ));
        }
        let size = src.element_type().size();
        let input = src.placed(op, src.shape(), &iota(src.shape().len()))?;
        let copy = table::copy(size).ok_or_else(|| eval::mismatch(op))?;
        // SAFETY: a copy of the elements' size between two tensors of one type (plain numbers,
        // no drop glue) and shape; `self` is borrowed mutably, so nothing else touches it.
        unsafe { table::write(self.output(), copy.into(), &[&input]) }
    }
}

/// A fresh tensor whose elements are not written yet: its type, and room for it.
pub(super) struct Unwritten {
    ty: ElementType,
    blank: Blank,
}

impl Unwritten {
    /// A fresh tensor of `ty` and `shape`, laid out as a result read from inputs of `strides`
    /// ([`crate::engine::blank_like`]); an error when it cannot be allocated.
    pub(super) fn new(
        ty: ElementType,
        op: &'static str,
        shape: &[usize],
        strides: &[&[isize]],
    ) -> Result<Unwritten> {
        let blank = crate::engine::blank_like(op, ty.layout(), shape, strides)?;
        Ok(Unwritten { ty, blank })
    }

    /// The array, as an operand to write.
    pub(super) fn operand(&mut self) -> Operand<'_> {
        self.blank.operand()
    }
}

impl TensorView<'_> {
    /// The elements copied into a fresh tensor in the standard layout by the engine's copy
    /// loop of their size (one loop per size, where ndarray's `to_owned` compiles one per
    /// element type); an error when it cannot be allocated.
    pub(super) fn copied(&self, op: &'static str) -> Result<Tensor> {
        let (ty, shape) = (self.element_type(), self.shape());
        let input = self.placed(op, shape, &iota(shape.len()))?;
        let copy = table::copy(ty.size()).ok_or_else(|| eval::mismatch(op))?;
        // No inputs to follow: the standard layout.
        let mut out = Unwritten::new(ty, op, shape, &[])?;
        // SAFETY: a copy of the elements' size (plain numbers, no drop glue) from the view, at
        // its own shape, into a fresh tensor of its type and shape, which the chain writes
        // element by element, every one once.
        unsafe {
            table::write(out.operand(), copy.into(), &[&input])?;
            Ok(out.assume_init())
        }
    }
}

/// A value while a program runs: an array it computed, or one it reads where it lies (an
/// input, the caller's, or a constant of the program).
#[derive(Debug, Clone)]
pub(crate) enum Held<'t> {
    Owned(Tensor),
    Read(TensorView<'t>),
}

impl Held<'_> {
    pub(super) fn element_type(&self) -> ElementType {
        match self {
            Held::Owned(t) => t.element_type(),
            Held::Read(v) => v.element_type(),
        }
    }

    pub(super) fn shape(&self) -> &[usize] {
        match self {
            Held::Owned(t) => t.shape(),
            Held::Read(v) => v.shape(),
        }
    }

    pub(super) fn strides(&self) -> &[isize] {
        match self {
            Held::Owned(t) => t.strides(),
            Held::Read(v) => v.strides(),
        }
    }

    /// The array seen at `shape`, its dim `i` at `dims[i]` ([`Tensor::placed`]).
    pub(super) fn placed<'a>(
        &'a self,
        op: &'static str,
        shape: &'a [usize],
        dims: &[usize],
    ) -> Result<Operand<'a>> {
        match self {
            Held::Owned(t) => t.placed(op, shape, dims),
            Held::Read(v) => v.placed(op, shape, dims),
        }
    }

    /// The array, owned: moved out, or copied from where it lies.
    pub(super) fn into_owned(self) -> Tensor {
        match self {
            Held::Owned(t) => t,
            Held::Read(v) => v.to_tensor(),
        }
    }

    /// A view of the array.
    pub(super) fn read(&self) -> TensorView<'_> {
        match self {
            Held::Owned(t) => t.read(),
            Held::Read(v) => v.reborrow(),
        }
    }
}

/// An element type a [`Program`](super::Program) can hold, with its StableHLO type.
///
/// ```
/// use xla_bcast::stablehlo::{StableHloElement, Tensor};
///
/// assert_eq!(<i8 as StableHloElement>::TYPE.name, "i8");
/// let t = Tensor::from(ndarray::array![1u32, 2].into_dyn());
/// assert_eq!(u32::of(&t).unwrap().len(), 2);
/// assert!(f32::of(&t).is_none());
/// ```
///
/// The types are the crate's (a [`Tensor`] holds one of them), so the trait is sealed: a type
/// of a user's cannot claim an element type a program has no kernels for.
///
/// ```compile_fail
/// use xla_bcast::stablehlo::{ElementType, Kind, StableHloElement, Tensor};
/// use xla_bcast::XlaElement;
///
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// struct Mine(f32);
/// impl XlaElement for Mine {
///     fn xla_add(self, r: Self) -> Self { Mine(self.0 + r.0) }
///     fn xla_mul(self, r: Self) -> Self { Mine(self.0 * r.0) }
///     fn xla_zero() -> Self { Mine(0.0) }
///     fn xla_one() -> Self { Mine(1.0) }
/// }
/// impl StableHloElement for Mine {
///     const TYPE: ElementType = ElementType { name: "mine", kind: Kind::Float };
///     fn of(_: &Tensor) -> Option<&ndarray::ArrayD<Self>> { None }
///     fn literal(self) -> String { String::new() }
/// }
/// ```
pub trait StableHloElement: XlaElement + sealed::Sealed {
    /// Its StableHLO type.
    const TYPE: ElementType;
    /// The array inside `t`, if `t` holds this type.
    fn of(t: &Tensor) -> Option<&ArrayD<Self>>;
    /// The value as a StableHLO literal, exactly (floats as their bits).
    fn literal(self) -> String;
}

/// The seal of [`StableHloElement`]: implemented for the crate's element types only.
mod sealed {
    pub trait Sealed {}
}
