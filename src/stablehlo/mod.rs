//! The same broadcasting program on this machine and on XLA: a [`Program`] records the crate's
//! ops on symbolic arrays, checking shapes with the very same rules (the same
//! [`BroadcastError`]s, at record time), and then either runs here ([`Program::run`], through
//! the crate's own ops) or prints as StableHLO text ([`Program::to_stablehlo`]) that XLA (through
//! JAX, or any PJRT runtime) compiles and runs unchanged, on any device.
//!
//! ```
//! use ndarray::{array, ArrayD};
//! use xla_bcast::stablehlo::{Program, Tensor};
//!
//! let mut p = Program::new("bias_add");
//! let x = p.parameter::<f32>(&[2, 3]);
//! let v = p.parameter::<f32>(&[3]);
//! let y = p.add(x, v, &[1]).unwrap(); // broadcast_dimensions, as add_bcast
//! p.output(y).unwrap();
//! assert!(p.add(x, v, &[0]).is_err()); // the crate's rule, at record time
//!
//! let out = p
//!     .run(&[array![[1f32, 2., 3.], [4., 5., 6.]].into_dyn().into(), array![10f32, 20., 30.].into_dyn().into()])
//!     .unwrap();
//! assert_eq!(out[0], Tensor::from(array![[11f32, 22., 33.], [14., 25., 36.]].into_dyn()));
//!
//! let text: String = p.to_stablehlo();
//! assert!(text.contains("func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> (tensor<2x3xf32>)"));
//! assert!(text.contains("stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>"));
//! ```
//!
//! What the export covers: every binary op of the crate (`add_bcast` and its family), the
//! comparisons, `select`, `clamp`, `broadcast_in_dim`, the sum [`Program::reduce_in_dim`] and
//! the unary ops ([`Program::abs`] .. [`Program::sqrt`]: the exact ones so far) and the
//! reductions over axes ([`Program::reduce_sum`] .. [`Program::reduce_or`]), on every element
//! type the crate has (StableHLO's types for each; complex numbers only negate so far). Not covered: the NumPy and Paddle wrappers (record their
//! `broadcast_dimensions` with the strict ops instead), closures (`zip_bcast`,
//! `reduce_in_dim_with`), layouts, and `_into` / in-place forms (a program's values are fresh).
//!
//! Where XLA and the crate are known to differ, see the README's "Where the references
//! disagree" (integer `pow` with exponents of 64 and more).

use ndarray::ArrayD;

use crate::error::{BroadcastError, Result};
use crate::shape::{binary_plan, broadcast_in_dim_shape, clamp_shape, in_dim_check, select_shape};

mod compile;
pub use compile::Executable;
pub mod sharding;
pub use sharding::{Mesh, PartitionSpec, ShardingDialect};
mod eval;
mod export;
mod tensor;
use eval::eval;
pub use tensor::{ElementType, Kind, StableHloElement, Tensor, TensorView, TensorViewMut};
use tensor::{Held, Unwritten};

/// The kinds of element that implement an element trait of [`crate::element`], as a pattern
/// over [`Kind`]: what the recorder checks at run time where the array ops check at compile time.
macro_rules! kinds_of {
    (XlaElement) => {
        Kind::Pred | Kind::Signed | Kind::Unsigned | Kind::Float | Kind::Complex
    };
    (XlaNumber) => {
        Kind::Signed | Kind::Unsigned | Kind::Float | Kind::Complex
    };
    (XlaReal) => {
        Kind::Signed | Kind::Unsigned | Kind::Float
    };
    (XlaOrd) => {
        Kind::Pred | Kind::Signed | Kind::Unsigned | Kind::Float
    };
    (XlaBitwise) => {
        Kind::Pred | Kind::Signed | Kind::Unsigned
    };
    (XlaInteger) => {
        Kind::Signed | Kind::Unsigned
    };
    (XlaFloat) => {
        Kind::Float | Kind::Complex
    };
}

/// A symbolic array of a [`Program`]: a handle, cheap to copy, valid in the program that made
/// it and in clones of that program made after it (which share the history it belongs to).
///
/// ```
/// use xla_bcast::stablehlo::Program;
///
/// let mut p = Program::new("v");
/// let x = p.parameter::<f32>(&[3]); // a Value: a handle to a symbolic array
/// let y = p.exp(x).unwrap();
/// assert_eq!(p.shape(y).unwrap(), &[3]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value {
    program: u64,
    index: usize,
}

/// Generates, from one row per op, its enum (`$enum`), the crate's name and StableHLO's for each
/// variant, and the [`Program`] method that records it (named as the crate's op).
macro_rules! op_table {
    ($(#[$m:meta])* $enum:ident, $record:ident, $doc:literal, $errors:literal;
     $($name:ident => $v:ident, $hlo:literal, [$($example:expr),*];)*) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum $enum {
            $($v,)*
        }

        impl $enum {
            /// Every row, in the table's order.
            #[cfg(test)]
            pub(crate) const ALL: &'static [Self] = &[$($enum::$v,)*];

            /// The crate's name and StableHLO's.
            fn names(self) -> (&'static str, &'static str) {
                match self {
                    $($enum::$v => (stringify!($name), $hlo),)*
                }
            }
        }

        impl Program {
            $(
                #[doc = concat!("Records `", stringify!($name), "` ", $doc, " (as `", stringify!($name), "_bcast`).")]
                ///
                /// ```
                /// use ndarray::array;
                /// use xla_bcast::stablehlo::{Program, Tensor};
                ///
                #[doc = concat!("let mut p = Program::new(\"", stringify!($name), "\");")]
                $(#[doc = $example])*
                /// ```
                ///
                /// # Errors
                #[doc = $errors]
                pub fn $name(&mut self, lhs: Value, rhs: Value, broadcast_dimensions: &[usize]) -> Result<Value> {
                    self.$record($enum::$v, lhs, rhs, broadcast_dimensions)
                }
            )*
        }
    };
}

/// The binary ops of the table ([`crate::op_table`]): their enum, names and recording
/// methods, and the element kinds each is defined on (its element trait's).
macro_rules! program_binary {
    ($( $name:ident, $hlo:literal, $v:ident, $bound:ident, $elem:ident, [$($methods:ident),*],
        $paddle:ident, [$($std:tt)*], $t:literal, $expect:literal; )*) => {
        op_table! {
            /// The elementwise binary ops, by the crate's names.
            Binary, binary,
            "of `lhs` and `rhs` with XLA's `broadcast_dimensions`",
            "The shape rule's error, or [`BroadcastError::ElementType`] when the operands' types differ or do not have the op.";
            $($name => $v, $hlo, [
                concat!("let a = p.parameter::<", $t, ">(&[2, 2]);"),
                concat!("let v = p.parameter::<", $t, ">(&[2]);"),
                concat!("let c = p.", stringify!($name), "(a, v, &[1]).unwrap(); // v along dim 1"),
                "p.output(c).unwrap();",
                concat!("let x = array![[1", $t, ", 2", $t, "], [3", $t, ", 4", $t, "]];"),
                concat!("let out = p.run(&[x.into_dyn().into(), array![2", $t, ", 3", $t, "].into_dyn().into()]).unwrap();"),
                concat!("assert_eq!(out[0].view::<", $t, ">().unwrap()[[1, 1]], ", $expect, "); // 4 ", stringify!($name), " 3"),
                concat!("assert!(p.", stringify!($name), "(a, v, &[0, 1]).is_err()); // one dim per dim of v")
            ];)*
        }

        impl Binary {
            /// Whether elements of `kind` have this op (its element trait's kinds).
            fn defined_for(self, kind: Kind) -> bool {
                match self {
                    $(Binary::$v => matches!(kind, kinds_of!($bound)),)*
                }
            }
        }
    };
}

binary_ops!(program_binary);

/// The comparisons of the table ([`crate::op_table`]): their enum, directions and recording
/// methods.
macro_rules! program_compare {
    ($( $name:ident, $hlo:literal, $v:ident, $bound:ident, $cmp:tt, [$($methods:ident),*], $expect:literal; )*) => {
        op_table! {
            /// The comparison directions.
            Direction, compare,
            "of `lhs` and `rhs`, a `bool` result (`i1`), with XLA's `broadcast_dimensions`",
            "The shape rule's error, or [`BroadcastError::ElementType`] (different types, or an order of complex numbers).";
            $($name => $v, $hlo, [
                "let a = p.parameter::<i64>(&[2, 2]);",
                "let v = p.parameter::<i64>(&[2]);",
                concat!("let c = p.", stringify!($name), "(a, v, &[1]).unwrap(); // v along dim 1"),
                "p.output(c).unwrap();",
                "let out = p.run(&[array![[1i64, 2], [3, 4]].into_dyn().into(), array![2i64, 4].into_dyn().into()]).unwrap();",
                concat!("assert_eq!(out[0], Tensor::from(array!", $expect, ".into_dyn()));")
            ];)*
        }
    };
}

compare_ops!(program_compare);

/// Generates, from one row per unary op, its enum, its StableHLO name and the [`Program`]
/// method that records it (JAX `lax`'s name).
macro_rules! unaries {
    ($($name:ident => $v:ident, $hlo:literal, [$($methods:ident),*], [$($kind:ident),*], $what:literal, $ty:ty, $input:expr, $want:expr;)*) => {
        /// The unary elementwise ops.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Unary {
            $($v,)*
        }

        impl Unary {
            /// Every row, in the table's order.
            #[cfg(test)]
            pub(crate) const ALL: &'static [Self] = &[$(Unary::$v,)*];

            /// The crate's name and StableHLO's.
            fn names(self) -> (&'static str, &'static str) {
                match self {
                    $(Unary::$v => (stringify!($name), $hlo),)*
                }
            }

            /// Whether elements of `kind` have this op (StableHLO's types).
            fn defined_for(self, kind: Kind) -> bool {
                match self {
                    $(Unary::$v => matches!(kind, $(Kind::$kind)|*),)*
                }
            }
        }

        impl Program {
            $(
                #[doc = concat!("Records `", stringify!($name), "`: ", $what, " (`stablehlo.", $hlo, "`).")]
                ///
                /// ```
                /// use ndarray::arr1;
                /// use xla_bcast::stablehlo::{Program, Tensor};
                ///
                /// let mut p = Program::new("u");
                #[doc = concat!("let x = p.parameter::<", stringify!($ty), ">(&[3]);")]
                #[doc = concat!("let y = p.", stringify!($name), "(x).unwrap();")]
                /// p.output(y).unwrap();
                #[doc = concat!("let out = p.run(&[arr1(&", stringify!($input), ").into_dyn().into()]).unwrap();")]
                #[doc = concat!("assert_eq!(out[0], Tensor::from(arr1(&", stringify!($want), ").into_dyn()));")]
                /// ```
                ///
                /// # Errors
                /// [`BroadcastError::ElementType`] for an element type StableHLO does not define
                /// it on (or that the crate does not run it on yet: see the README).
                pub fn $name(&mut self, x: Value) -> Result<Value> {
                    self.unary(Unary::$v, x)
                }
            )*
        }
    };
}

unary_ops!(unaries);

/// Generates, from one row per reduction, its enum, its StableHLO region (and `bool`'s, whose
/// `add` is `or`), the element kinds it is defined on and the [`Program`] method that records
/// it. Its identity is its fold's ([`TableFold`](crate::engine::reduce::TableFold)).
macro_rules! reductions {
    ($($name:ident => $v:ident, $hlo:literal, $pred:literal, [$($kind:ident),*], $what:literal, $fold:literal;)*) => {
        /// The reductions over axes, by JAX `lax`'s names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Reduction {
            $($v,)*
        }

        impl Reduction {
            /// The crate's name, the StableHLO op of its region, and that op for `bool`.
            fn names(self) -> (&'static str, &'static str, &'static str) {
                match self {
                    $(Reduction::$v => (stringify!($name), $hlo, $pred),)*
                }
            }

            /// Whether elements of `kind` have this reduction (StableHLO's types for its
            /// region).
            fn defined_for(self, kind: Kind) -> bool {
                match self {
                    $(Reduction::$v => matches!(kind, $(Kind::$kind)|*),)*
                }
            }
        }

        impl Program {
            $(
                #[doc = concat!("Records `", stringify!($name), "`: ", $what, " of `x` over `axes`, which the result drops (as JAX's `lax.", stringify!($name), "`), exported as one `stablehlo.reduce` whose region is `stablehlo.", $hlo, "`, started at its identity.")]
                ///
                /// ```
                /// use ndarray::array;
                /// use xla_bcast::stablehlo::{Program, Tensor};
                ///
                /// let mut p = Program::new("r");
                /// let x = p.parameter::<i32>(&[2, 3]);
                #[doc = concat!("let r = p.", stringify!($name), "(x, &[1]).unwrap();")]
                /// assert_eq!(p.shape(r).unwrap(), &[2]);
                /// p.output(r).unwrap();
                /// let out = p.run(&[array![[1, 2, 3], [4, 5, 6]].into_dyn().into()]).unwrap();
                #[doc = concat!("let want = [array![1, 2, 3], array![4, 5, 6]].map(|row| row.iter().copied().reduce(", $fold, ").unwrap());")]
                /// assert_eq!(out[0], Tensor::from(ndarray::arr1(&want).into_dyn()));
                #[doc = concat!("assert!(p.", stringify!($name), "(x, &[2]).is_err()); // no axis 2")]
                /// ```
                ///
                /// # Errors
                /// [`BroadcastError::ReduceAxes`] for an axis out of range or given twice;
                /// [`BroadcastError::ElementType`] for an element type StableHLO does not define
                /// it on.
                pub fn $name(&mut self, x: Value, axes: &[usize]) -> Result<Value> {
                    self.reduce(Reduction::$v, x, axes)
                }
            )*
        }
    };
}

reductions! {
    reduce_sum => Sum, "add", "or", [Pred, Signed, Unsigned, Float, Complex],
        "the sum (`bool`: any)", "|a, b| a + b";
    reduce_prod => Prod, "multiply", "and", [Pred, Signed, Unsigned, Float, Complex],
        "the product (`bool`: all)", "|a, b| a * b";
    reduce_max => Max, "maximum", "or", [Pred, Signed, Unsigned, Float],
        "the maximum (NaN propagates)", "i32::max";
    reduce_min => Min, "minimum", "and", [Pred, Signed, Unsigned, Float],
        "the minimum (NaN propagates)", "i32::min";
    reduce_and => And, "and", "and", [Pred, Signed, Unsigned],
        "the bitwise and (`bool`: all)", "|a, b| a & b";
    reduce_or => Or, "or", "or", [Pred, Signed, Unsigned],
        "the bitwise or (`bool`: any)", "|a, b| a | b";
}

/// Where a binary op's operands go in its result: the `broadcast_in_dim` dims of the lhs and
/// of the rhs.
type Place = [Vec<usize>; 2];

#[derive(Debug, Clone)]
enum Op {
    Parameter,
    Constant(Tensor),
    BroadcastInDim {
        x: Value,
        dims: Vec<usize>,
    },
    /// `place`: the `broadcast_in_dim` dims that put each operand at the result's shape, from
    /// the rule when the op was recorded.
    Binary {
        op: Binary,
        lhs: Value,
        rhs: Value,
        place: Place,
    },
    Compare {
        dir: Direction,
        lhs: Value,
        rhs: Value,
        place: Place,
    },
    Select {
        pred: Value,
        on_true: Value,
        on_false: Value,
    },
    Clamp {
        min: Value,
        x: Value,
        max: Value,
    },
    ReduceInDim {
        x: Value,
        dims: Vec<usize>,
    },
    Reduce {
        op: Reduction,
        x: Value,
        axes: Vec<usize>,
    },
    Unary {
        op: Unary,
        x: Value,
    },
    Convert {
        x: Value,
    },
    /// `stablehlo.iota`: each element its index along `dim`, in the node's type.
    Iota {
        dim: usize,
    },
    /// The index along `axis` of the minimum of `x` (the maximum with `max`), in the node's
    /// (integer) type.
    ArgReduce {
        max: bool,
        x: Value,
        axis: usize,
    },
}

impl Op {
    /// The crate's name of the op, for errors.
    fn name(&self) -> &'static str {
        match self {
            Op::Binary { op, .. } => op.names().0,
            Op::Compare { dir, .. } => dir.names().0,
            Op::Unary { op, .. } => op.names().0,
            Op::Reduce { op, .. } => op.names().0,
            Op::Select { .. } => "select",
            Op::Clamp { .. } => "clamp",
            Op::Convert { .. } => "convert",
            Op::BroadcastInDim { .. } => "broadcast_in_dim",
            Op::ReduceInDim { .. } => "reduce_in_dim",
            Op::Parameter => "parameter",
            Op::Constant(_) => "constant",
            Op::Iota { .. } => "iota",
            Op::ArgReduce { max: false, .. } => "argmin",
            Op::ArgReduce { max: true, .. } => "argmax",
        }
    }

    /// The values the op reads.
    fn operands(&self) -> [Option<Value>; 3] {
        match *self {
            Op::Parameter | Op::Constant(_) | Op::Iota { .. } => [None; 3],
            Op::BroadcastInDim { x, .. }
            | Op::ArgReduce { x, .. }
            | Op::ReduceInDim { x, .. }
            | Op::Reduce { x, .. }
            | Op::Unary { x, .. }
            | Op::Convert { x } => [Some(x), None, None],
            Op::Binary { lhs, rhs, .. } | Op::Compare { lhs, rhs, .. } => {
                [Some(lhs), Some(rhs), None]
            }
            Op::Select {
                pred,
                on_true,
                on_false,
            } => [Some(pred), Some(on_true), Some(on_false)],
            Op::Clamp { min, x, max } => [Some(min), Some(x), Some(max)],
        }
    }
}

#[derive(Debug, Clone)]
struct Node {
    op: Op,
    shape: Vec<usize>,
    ty: ElementType,
}

/// A broadcasting program over symbolic arrays; see the [module](self).
///
/// A clone is a program of its own: the values of the history it copied are valid in both,
/// a value either records afterwards belongs to that one alone (an error in the other, never
/// another node).
///
/// ```
/// use xla_bcast::stablehlo::Program;
/// let mut p = Program::new("m");
/// let x = p.parameter::<f32>(&[2]);
/// let mut q = p.clone();
/// let y = q.add(x, x, &[]).unwrap(); // `x` is in q's history
/// assert!(p.output(y).is_err()); // `y` is q's alone
/// let z = p.mul(x, x, &[]).unwrap();
/// assert!(q.output(z).is_err() && p.output(z).is_ok());
/// ```
#[derive(Debug)]
pub struct Program {
    id: u64,
    /// The programs this one was cloned from, nearest last, with their number of nodes then:
    /// their values below that count are this one's too.
    lineage: Vec<(u64, usize)>,
    name: String,
    nodes: Vec<Node>,
    params: Vec<Value>,
    outputs: Vec<Value>,
    /// The device mesh shardings name ([`sharding`]).
    mesh: Option<Mesh>,
    /// Shardings of parameters and outputs, by node.
    shardings: Vec<(usize, PartitionSpec)>,
}

/// A number no other program has had.
fn fresh_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Clone for Program {
    /// A program of its own with this one's history (see [`Program`]).
    fn clone(&self) -> Self {
        let mut lineage = self.lineage.clone();
        lineage.push((self.id, self.nodes.len()));
        Program {
            id: fresh_id(),
            lineage,
            name: self.name.clone(),
            nodes: self.nodes.clone(),
            params: self.params.clone(),
            outputs: self.outputs.clone(),
            mesh: self.mesh.clone(),
            shardings: self.shardings.clone(),
        }
    }
}

/// The error for an op whose operands' element types do not fit it.
fn type_error(op: &'static str, types: &[ElementType], reason: &str) -> BroadcastError {
    let names: Vec<&str> = types.iter().map(|t| t.name).collect();
    BroadcastError::ElementType {
        op,
        types: names.join(", "),
        reason: reason.to_string(),
    }
}

impl Program {
    /// An empty program; `name` names the StableHLO module.
    ///
    /// ```
    /// let p = xla_bcast::stablehlo::Program::new("model");
    /// assert!(p.to_stablehlo().starts_with("module @model {"));
    /// ```
    pub fn new(name: &str) -> Self {
        let mut safe = String::with_capacity(name.len());
        for c in name.chars() {
            safe.push(if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            });
        }
        let name = safe;
        Program {
            id: fresh_id(),
            lineage: Vec::new(),
            name,
            nodes: Vec::new(),
            params: Vec::new(),
            outputs: Vec::new(),
            mesh: None,
            shardings: Vec::new(),
        }
    }

    /// The name the program was made with (its StableHLO function's, sanitised).
    ///
    /// ```
    /// use xla_bcast::stablehlo::Program;
    /// assert_eq!(Program::new("layer_norm").name(), "layer_norm");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    fn push(&mut self, op: Op, shape: Vec<usize>, ty: ElementType) -> Value {
        self.nodes.push(Node { op, shape, ty });
        Value {
            program: self.id,
            index: self.nodes.len() - 1,
        }
    }

    /// A recorded value's node (every value inside the program is its own).
    fn node(&self, v: Value) -> &Node {
        &self.nodes[v.index]
    }

    /// A slot per node, the parameters' holding `inputs` (read in place), after checking their
    /// count, types and shapes.
    fn inputs<'t, 'i: 't>(
        &self,
        op: &'static str,
        inputs: &[TensorView<'i>],
    ) -> Result<Vec<Option<Held<'t>>>> {
        if inputs.len() != self.params.len() {
            return Err(BroadcastError::ArgumentCount {
                op,
                program: self.name.clone(),
                kind: "inputs",
                expected: self.params.len(),
                got: inputs.len(),
            });
        }
        let mut values: Vec<Option<Held<'t>>> = vec![None; self.nodes.len()];
        for (k, (p, input)) in self.params.iter().zip(inputs).enumerate() {
            let node = self.node(*p);
            self.check_argument(op, "input", k, node, input.element_type(), input.shape())?;
            values[p.index] = Some(Held::Read(input.reborrow()));
        }
        Ok(values)
    }

    /// That `t`, the program's input or output `k` (`kind`), has `node`'s type and shape: the
    /// errors name the argument, the type or shape it must have and the one given.
    fn check_argument(
        &self,
        op: &'static str,
        kind: &str,
        k: usize,
        node: &Node,
        got: ElementType,
        shape: &[usize],
    ) -> Result<()> {
        let argument = || format!("{kind} {k} of program {:?}", self.name);
        if got != node.ty {
            return Err(BroadcastError::ElementType {
                op,
                types: got.name.to_string(),
                reason: format!(
                    "{} is {}, but must be {}",
                    argument(),
                    got.name,
                    node.ty.name
                ),
            });
        }
        if !crate::shape::same_dims(&node.shape, shape) {
            return Err(BroadcastError::ArgumentShape {
                op,
                argument: argument(),
                expected: node.shape[..].into(),
                got: shape.into(),
            });
        }
        Ok(())
    }

    /// `Ok` when every one of `values` is this program's (made by it, or by a program it was
    /// cloned from before the clone): an error (not a panic) for a handle of another one.
    fn own(&self, op: &'static str, values: &[Value]) -> Result<()> {
        let mine = |v: &Value| {
            (v.program == self.id && v.index < self.nodes.len())
                || self
                    .lineage
                    .iter()
                    .any(|&(id, len)| v.program == id && v.index < len)
        };
        match values.iter().all(mine) {
            true => Ok(()),
            false => Err(BroadcastError::ForeignValue {
                op,
                program: self.name.clone(),
            }),
        }
    }

    /// A new parameter (the program's next input) of element type `T` and shape `shape`.
    ///
    /// ```
    /// use xla_bcast::stablehlo::Program;
    /// let mut p = Program::new("m");
    /// let x = p.parameter::<i64>(&[4]);
    /// assert_eq!(p.shape(x).unwrap(), &[4]);
    /// ```
    pub fn parameter<T: StableHloElement>(&mut self, shape: &[usize]) -> Value {
        let v = self.push(Op::Parameter, shape.to_vec(), T::TYPE);
        self.params.push(v);
        v
    }

    /// A scalar constant (rank 0: it broadcasts to anything).
    ///
    /// ```
    /// use xla_bcast::stablehlo::Program;
    /// let mut p = Program::new("relu");
    /// let x = p.parameter::<f32>(&[4]);
    /// let zero = p.constant(0.0f32);
    /// let y = p.max(x, zero, &[]).unwrap();
    /// p.output(y).unwrap();
    /// assert!(p.to_stablehlo().contains("stablehlo.constant dense<0x00000000> : tensor<f32>"));
    /// ```
    pub fn constant<T: StableHloElement>(&mut self, value: T) -> Value
    where
        Tensor: From<ArrayD<T>>,
    {
        let t = Tensor::from(ArrayD::from_elem(ndarray::IxDyn(&[]), value));
        self.push(Op::Constant(t), vec![], T::TYPE)
    }

    /// An array constant: a copy of `a`, exported as a `stablehlo.constant` of its elements
    /// (a splat when they are all equal).
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("shift");
    /// let x = p.parameter::<i32>(&[2, 2]);
    /// let c = p.constant_array(&array![[1, 2], [3, 4]]);
    /// let y = p.add(x, c, &[]).unwrap();
    /// p.output(y).unwrap();
    /// assert!(p.to_stablehlo().contains("stablehlo.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>"));
    /// let out = p.run(&[array![[10, 10], [10, 10]].into()]).unwrap();
    /// assert_eq!(out[0], Tensor::from(array![[11, 12], [13, 14]]));
    /// ```
    pub fn constant_array<T: StableHloElement, D: ndarray::Dimension>(
        &mut self,
        a: &ndarray::ArrayRef<T, D>,
    ) -> Value
    where
        Tensor: From<ArrayD<T>>,
    {
        let t = Tensor::from(a.to_owned().into_dyn());
        self.push(Op::Constant(t), a.shape().to_vec(), T::TYPE)
    }

    /// `stablehlo.iota`: an array of `shape` whose elements are their index along `dim`, in
    /// type `T` (as `lax.broadcasted_iota`). With a comparison it builds masks, such as a
    /// causal one.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("causal");
    /// let (row, col) = (p.iota::<i32>(&[3, 3], 0).unwrap(), p.iota::<i32>(&[3, 3], 1).unwrap());
    /// let keep = p.le(col, row, &[]).unwrap(); // key <= query
    /// p.output(keep).unwrap();
    /// assert!(p.to_stablehlo().contains("stablehlo.iota dim = 0 : tensor<3x3xi32>"));
    /// let out = p.run(&[]).unwrap();
    /// assert_eq!(out[0], Tensor::from(array![[true, false, false], [true, true, false], [true, true, true]]));
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::ReduceAxes`] for a `dim` out of range; [`BroadcastError::ElementType`]
    /// for `bool` (StableHLO's iota is of numbers); [`BroadcastError::SizeOverflow`] for a shape
    /// too large to index.
    pub fn iota<T: StableHloElement>(&mut self, shape: &[usize], dim: usize) -> Result<Value> {
        if dim >= shape.len() {
            return Err(BroadcastError::ReduceAxes {
                op: "iota",
                shape: shape.into(),
                axes: [dim].into(),
                reason: format!("dim {dim} is out of range for rank {}", shape.len()),
            });
        }
        if T::TYPE.kind == Kind::Pred {
            let reason = "StableHLO's iota is of numbers";
            return Err(type_error("iota", &[T::TYPE], reason));
        }
        crate::shape::checked_size_for("iota", shape)?;
        Ok(self.push(Op::Iota { dim }, shape.to_vec(), T::TYPE))
    }

    /// The parameters, in the order `run` takes their inputs.
    ///
    /// ```
    /// use xla_bcast::stablehlo::Program;
    /// let mut p = Program::new("m");
    /// let (x, y) = (p.parameter::<f32>(&[2]), p.parameter::<i8>(&[]));
    /// p.output(y).unwrap();
    /// assert_eq!(p.parameters(), [x, y]);
    /// assert_eq!(p.outputs(), [y]);
    /// ```
    pub fn parameters(&self) -> &[Value] {
        &self.params
    }

    /// The outputs, in the order `run` gives them ([`Program::parameters`] shows it).
    ///
    /// ```
    /// use xla_bcast::stablehlo::Program;
    ///
    /// let mut p = Program::new("two");
    /// let x = p.parameter::<f32>(&[2]);
    /// let y = p.neg(x).unwrap();
    /// p.output(y).unwrap();
    /// p.output(x).unwrap();
    /// assert_eq!(p.outputs(), &[y, x]);
    /// ```
    pub fn outputs(&self) -> &[Value] {
        &self.outputs
    }

    /// The shape of `v`; an error for a value of another program.
    ///
    /// ```
    /// use xla_bcast::stablehlo::Program;
    ///
    /// let mut p = Program::new("s");
    /// let x = p.parameter::<f32>(&[4, 3]);
    /// let r = p.reduce_sum(x, &[0]).unwrap();
    /// assert_eq!(p.shape(r).unwrap(), &[3]);
    /// assert!(Program::new("other").shape(x).is_err());
    /// ```
    pub fn shape(&self, v: Value) -> Result<&[usize]> {
        self.own("shape", &[v])?;
        Ok(&self.node(v).shape)
    }

    /// The element type of `v`; an error for a value of another program.
    ///
    /// ```
    /// use xla_bcast::stablehlo::Program;
    ///
    /// let mut p = Program::new("t");
    /// let x = p.parameter::<u8>(&[2]);
    /// let c = p.lt(x, x, &[]).unwrap();
    /// assert_eq!(p.element_type(x).unwrap().name, "ui8");
    /// assert_eq!(p.element_type(c).unwrap().name, "i1");
    /// ```
    pub fn element_type(&self, v: Value) -> Result<ElementType> {
        self.own("element_type", &[v])?;
        Ok(self.node(v).ty)
    }

    /// Marks `v` as the program's next result; an error for a value of another program.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("id");
    /// let x = p.parameter::<i32>(&[2]);
    /// p.output(x).unwrap();
    /// let out = p.run(&[array![1, 2].into_dyn().into()]).unwrap();
    /// assert_eq!(out, [Tensor::from(array![1, 2].into_dyn())]);
    /// ```
    pub fn output(&mut self, v: Value) -> Result<()> {
        self.own("output", &[v])?;
        self.outputs.push(v);
        Ok(())
    }

    /// Records `broadcast_in_dim` (as
    /// [`BroadcastInDim::broadcast_in_dim`](crate::ops::BroadcastInDim::broadcast_in_dim)).
    ///
    /// # Errors
    /// The rule's error.
    ///
    /// ```
    /// use xla_bcast::stablehlo::Program;
    /// let mut p = Program::new("m");
    /// let v = p.parameter::<f32>(&[3]);
    /// let b = p.broadcast_in_dim(v, &[2, 3], &[1]).unwrap();
    /// assert_eq!(p.shape(b).unwrap(), &[2, 3]);
    /// assert!(p.broadcast_in_dim(v, &[3, 2], &[1]).is_err());
    /// ```
    pub fn broadcast_in_dim(
        &mut self,
        x: Value,
        out_shape: &[usize],
        dims: &[usize],
    ) -> Result<Value> {
        self.own("broadcast_in_dim", &[x])?;
        let node = self.node(x);
        let ty = node.ty;
        in_dim_check("broadcast_in_dim", &node.shape, out_shape, dims)?;
        broadcast_in_dim_shape(&node.shape, out_shape, dims)?;
        Ok(self.push(
            Op::BroadcastInDim {
                x,
                dims: dims.to_vec(),
            },
            out_shape.to_vec(),
            ty,
        ))
    }

    /// The checks of a binary op or comparison, in order: both operands are this program's, of
    /// one element type that has the op (`has`, else `lacks` says why), and their shapes meet
    /// XLA's rule. Gives that type and the output shape.
    fn binary_operands(
        &self,
        name: &'static str,
        [lhs, rhs]: [Value; 2],
        dims: &[usize],
        has: impl Fn(ElementType) -> bool,
        lacks: &str,
    ) -> Result<(ElementType, Vec<usize>, Place)> {
        self.own(name, &[lhs, rhs])?;
        let (l, r) = (self.node(lhs), self.node(rhs));
        if l.ty != r.ty {
            let reason = "the operands must have one element type";
            return Err(type_error(name, &[l.ty, r.ty], reason));
        }
        if !has(l.ty) {
            return Err(type_error(name, &[l.ty], lacks));
        }
        let plan = binary_plan(name, &l.shape, &r.shape, dims)?;
        let place = [plan.lhs_dims.to_vec(), plan.rhs_dims.to_vec()];
        Ok((l.ty, plan.out.to_vec(), place))
    }

    fn binary(&mut self, op: Binary, lhs: Value, rhs: Value, dims: &[usize]) -> Result<Value> {
        let (ty, out, place) = self.binary_operands(
            op.names().0,
            [lhs, rhs],
            dims,
            |ty| op.defined_for(ty.kind),
            "XLA does not define the op for this type",
        )?;
        Ok(self.push(
            Op::Binary {
                op,
                lhs,
                rhs,
                place,
            },
            out,
            ty,
        ))
    }

    fn compare(&mut self, dir: Direction, lhs: Value, rhs: Value, dims: &[usize]) -> Result<Value> {
        let equality = matches!(dir, Direction::Eq | Direction::Ne);
        let (_, out, place) = self.binary_operands(
            dir.names().0,
            [lhs, rhs],
            dims,
            |ty| equality || ty.kind != Kind::Complex,
            "complex numbers have no order",
        )?;
        let op = Op::Compare {
            dir,
            lhs,
            rhs,
            place,
        };
        Ok(self.push(op, out, bool::TYPE))
    }

    /// Records `select(pred, on_true, on_false)` (as
    /// [`SelectBcast::select_bcast`](crate::ops::SelectBcast::select_bcast)).
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("relu");
    /// let x = p.parameter::<f32>(&[3]);
    /// let zero = p.constant(0.0f32);
    /// let positive = p.gt(x, zero, &[]).unwrap();
    /// let zeros = p.broadcast_in_dim(zero, &[3], &[]).unwrap();
    /// let y = p.select(positive, x, zeros).unwrap();
    /// p.output(y).unwrap();
    /// let out = p.run(&[array![-1.0f32, 2.0, -3.0].into_dyn().into()]).unwrap();
    /// assert_eq!(out[0], Tensor::from(array![0.0f32, 2.0, 0.0].into_dyn()));
    /// assert!(p.select(x, x, x).is_err()); // the predicate must be bool
    /// ```
    ///
    /// # Errors
    /// The rule's error, or [`BroadcastError::ElementType`] (`pred` not `bool`, or the two
    /// branches of different types).
    pub fn select(&mut self, pred: Value, on_true: Value, on_false: Value) -> Result<Value> {
        self.own("select", &[pred, on_true, on_false])?;
        let (p, t, f) = (self.node(pred), self.node(on_true), self.node(on_false));
        if p.ty != bool::TYPE || t.ty != f.ty {
            let reason = "the predicate must be i1 and the branches of one type";
            return Err(type_error("select", &[p.ty, t.ty, f.ty], reason));
        }
        let shape = select_shape(&p.shape, &t.shape, &f.shape)?;
        let ty = t.ty;
        Ok(self.push(
            Op::Select {
                pred,
                on_true,
                on_false,
            },
            shape,
            ty,
        ))
    }

    /// Records `clamp(min, x, max)` (as
    /// [`ClampBcast::clamp_bcast`](crate::ops::ClampBcast::clamp_bcast): bounds scalar or of
    /// `x`'s shape).
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("clip");
    /// let x = p.parameter::<i32>(&[4]);
    /// let (lo, hi) = (p.constant(0i32), p.constant(5i32));
    /// let y = p.clamp(lo, x, hi).unwrap();
    /// p.output(y).unwrap();
    /// let out = p.run(&[array![-2, 3, 9, 5].into_dyn().into()]).unwrap();
    /// assert_eq!(out[0], Tensor::from(array![0, 3, 5, 5].into_dyn()));
    /// ```
    ///
    /// # Errors
    /// The rule's error, or [`BroadcastError::ElementType`].
    pub fn clamp(&mut self, min: Value, x: Value, max: Value) -> Result<Value> {
        self.own("clamp", &[min, x, max])?;
        let (lo, v, hi) = (self.node(min), self.node(x), self.node(max));
        if lo.ty != v.ty || hi.ty != v.ty || v.ty.kind == Kind::Complex {
            let reason = "the three must have one ordered element type";
            return Err(type_error("clamp", &[lo.ty, v.ty, hi.ty], reason));
        }
        let shape = clamp_shape(&lo.shape, &v.shape, &hi.shape)?;
        let ty = v.ty;
        Ok(self.push(Op::Clamp { min, x, max }, shape, ty))
    }

    /// Records the sum of `x` back to `operand_shape` (as
    /// [`ReduceInDim::reduce_in_dim`](crate::reduce::ReduceInDim::reduce_in_dim)): a
    /// `stablehlo.reduce` with an add region, then a reshape and transpose to the target.
    /// `dims` are the dims of `x` the result keeps (result dim `i` is `x`'s dim `dims[i]`),
    /// where [`Program::reduce_sum`] takes the axes summed away.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("col_sums");
    /// let x = p.parameter::<i32>(&[2, 3]);
    /// let s = p.reduce_in_dim(x, &[3], &[1]).unwrap(); // keeps dim 1: NumPy's sum(axis=0)
    /// p.output(s).unwrap();
    /// let out = p.run(&[array![[1, 2, 3], [4, 5, 6]].into_dyn().into()]).unwrap();
    /// assert_eq!(out[0], Tensor::from(array![5, 7, 9].into_dyn()));
    /// assert!(p.reduce_in_dim(x, &[3], &[0]).is_err()); // dim 0 has 2 elements, not 3
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::ReduceInDims`], suggesting the dims that fit.
    pub fn reduce_in_dim(
        &mut self,
        x: Value,
        operand_shape: &[usize],
        dims: &[usize],
    ) -> Result<Value> {
        self.own("reduce_in_dim", &[x])?;
        let node = self.node(x);
        crate::shape::reduce_in_dim_check("reduce_in_dim", operand_shape, &node.shape, dims)?;
        let ty = node.ty;
        let dims = dims.to_vec();
        Ok(self.push(Op::ReduceInDim { x, dims }, operand_shape.to_vec(), ty))
    }

    /// The checks of a unary op: `x` is this program's, of an element type that has the op.
    /// Records `convert`: `x`'s elements as `T`s (`stablehlo.convert`, JAX's
    /// `lax.convert_element_type`), between any two element types. Exact where `T` holds the
    /// value; otherwise as XLA's CPU compiler converts, which StableHLO leaves to it: integers
    /// wrap, floats round to nearest (ties to even; to `f16` and `bf16` through `f32`, so from
    /// `f64` and wide integers twice), floats to integers truncate toward zero and saturate
    /// (NaN gives 0), anything to `bool` is `x != 0`, a complex number gives its real part and
    /// a real one a zero imaginary part.
    ///
    /// ```
    /// use ndarray::arr1;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("c");
    /// let x = p.parameter::<f32>(&[4]);
    /// let y = p.convert::<i8>(x).unwrap();
    /// p.output(y).unwrap();
    /// let out = p.run(&[arr1(&[2.9f32, -2.9, 300.0, f32::NAN]).into_dyn().into()]).unwrap();
    /// assert_eq!(out[0], Tensor::from(arr1(&[2i8, -2, 127, 0]).into_dyn()));
    /// assert!(p.to_stablehlo().contains("stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xi8>"));
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::ElementType`] when `x` is not this program's.
    pub fn convert<T: StableHloElement>(&mut self, x: Value) -> Result<Value> {
        self.own("convert", &[x])?;
        let shape = self.node(x).shape.clone();
        Ok(self.push(Op::Convert { x }, shape, T::TYPE))
    }

    fn unary(&mut self, op: Unary, x: Value) -> Result<Value> {
        let name = op.names().0;
        self.own(name, &[x])?;
        let node = self.node(x);
        if !op.defined_for(node.ty.kind) {
            let reason =
                "StableHLO does not define the op for this type, or the crate does not run it yet";
            return Err(type_error(name, &[node.ty], reason));
        }
        let ty = match op {
            Unary::IsFinite => bool::TYPE,
            // The modulus of a complex number is of its parts' type.
            Unary::Abs if node.ty.kind == Kind::Complex => match node.ty.name {
                "complex<f32>" => f32::TYPE,
                _ => f64::TYPE,
            },
            _ => node.ty,
        };
        let shape = node.shape.clone();
        Ok(self.push(Op::Unary { op, x }, shape, ty))
    }

    /// The checks of a reduction over `axes`, in order: `x` is this program's, of an element
    /// type that has the reduction, and `axes` are distinct dims of it.
    fn reduce(&mut self, op: Reduction, x: Value, axes: &[usize]) -> Result<Value> {
        let name = op.names().0;
        self.own(name, &[x])?;
        let node = self.node(x);
        if !op.defined_for(node.ty.kind) {
            let reason = "StableHLO does not define the reduction for this type";
            return Err(type_error(name, &[node.ty], reason));
        }
        let (ty, shape) = (node.ty, self.reduced(name, x, axes, false)?);
        let axes = axes.to_vec();
        Ok(self.push(Op::Reduce { op, x, axes }, shape, ty))
    }

    /// The shape of `x` without `axes`: an error for an axis out of range or given twice, or
    /// (`nonempty`) of size 0.
    fn reduced(
        &self,
        op: &'static str,
        x: Value,
        axes: &[usize],
        nonempty: bool,
    ) -> Result<Vec<usize>> {
        let shape = &self.node(x).shape;
        let rank = shape.len();
        let refuse = |reason: String| BroadcastError::ReduceAxes {
            op,
            shape: shape.clone().into(),
            axes: axes.into(),
            reason,
        };
        for (i, &a) in axes.iter().enumerate() {
            if a >= rank {
                return Err(refuse(format!("axis {a} is out of range for rank {rank}")));
            }
            if axes[..i].contains(&a) {
                return Err(refuse(format!("axis {a} is given twice")));
            }
            if nonempty && shape[a] == 0 {
                return Err(refuse(format!("axis {a} has no element, so no index")));
            }
        }
        let kept = (0..rank).filter(|d| !axes.contains(d));
        Ok(kept.map(|d| shape[d]).collect())
    }

    /// Records `argmin`: the index along `axis` of the minimum of `x`, of integer type `I`,
    /// which drops `axis` (as JAX's `lax.argmin`): the first index of the minimum, a NaN
    /// counting as the minimum, as [`argmin_in_dims`](crate::reduce::ReduceInDim::argmin_in_dims).
    /// Exported as XLA's two-operand `stablehlo.reduce` of `x` and an iota.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("nearest");
    /// let d = p.parameter::<f32>(&[2, 3]);
    /// let i = p.argmin::<i32>(d, 1).unwrap();
    /// p.output(i).unwrap();
    /// let out = p.run(&[array![[4.0f32, 1.0, 1.0], [2.0, f32::NAN, 0.0]].into()]).unwrap();
    /// assert_eq!(out[0], Tensor::from(array![1, 1]));
    /// assert!(p.argmin::<f32>(d, 1).is_err()); // indices are integers
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::ReduceAxes`] for an axis out of range or of size 0;
    /// [`BroadcastError::ElementType`] for complex `x`, or an `I` that is not an integer type
    /// or cannot hold the largest index.
    pub fn argmin<I: StableHloElement>(&mut self, x: Value, axis: usize) -> Result<Value> {
        self.arg_reduce(false, x, axis, I::TYPE)
    }

    /// Records `argmax`: [`Program::argmin`] for the maximum (a NaN counts as the maximum).
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("best");
    /// let x = p.parameter::<i64>(&[2, 3]);
    /// let i = p.argmax::<u8>(x, 0).unwrap();
    /// p.output(i).unwrap();
    /// let out = p.run(&[array![[3i64, 7, 7], [9, 2, 7]].into()]).unwrap();
    /// assert_eq!(out[0], Tensor::from(array![1u8, 0, 0]));
    /// ```
    ///
    /// # Errors
    /// As [`Program::argmin`].
    pub fn argmax<I: StableHloElement>(&mut self, x: Value, axis: usize) -> Result<Value> {
        self.arg_reduce(true, x, axis, I::TYPE)
    }

    /// Records `argmin` (`argmax` with `max`) of `x` over `axis` into indices of type `index`.
    fn arg_reduce(
        &mut self,
        max: bool,
        x: Value,
        axis: usize,
        index: ElementType,
    ) -> Result<Value> {
        let name = if max { "argmax" } else { "argmin" };
        self.own(name, &[x])?;
        let node = self.node(x);
        if node.ty.kind == Kind::Complex {
            let reason = "complex numbers have no order";
            return Err(type_error(name, &[node.ty], reason));
        }
        let shape = self.reduced(name, x, &[axis], true)?;
        let n = node.shape[axis];
        let bits = 8 * index.size() - usize::from(index.kind == Kind::Signed);
        let fits = bits >= 64 || (n as u64 - 1) >> bits == 0;
        if !matches!(index.kind, Kind::Signed | Kind::Unsigned) || !fits {
            let last = n - 1;
            let reason = format!("the index type must be an integer type that holds {last}");
            return Err(type_error(name, &[node.ty, index], &reason));
        }
        Ok(self.push(Op::ArgReduce { max, x, axis }, shape, index))
    }

    /// Runs the program here, on the crate's own ops, with one input per parameter (in the
    /// order they were made); the results come in the order of [`Program::output`].
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("scale");
    /// let x = p.parameter::<f64>(&[2, 2]);
    /// let v = p.parameter::<f64>(&[2]);
    /// let y = p.mul(x, v, &[0]).unwrap(); // v along dim 0: one factor per row
    /// p.output(y).unwrap();
    /// let out = p
    ///     .run(&[array![[1.0, 2.0], [3.0, 4.0]].into_dyn().into(), array![10.0, -1.0].into_dyn().into()])
    ///     .unwrap();
    /// assert_eq!(out[0], Tensor::from(array![[10.0, 20.0], [-3.0, -4.0]].into_dyn()));
    /// assert!(p.run(&[]).is_err()); // one input per parameter
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::ArgumentCount`] for the wrong number of inputs;
    /// [`BroadcastError::ElementType`] or [`BroadcastError::ArgumentShape`] when an input does
    /// not have its parameter's type or shape (the error names the input by its index); any
    /// error of an op (allocation).
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let views: Vec<TensorView<'_>> = inputs.iter().map(Tensor::read).collect();
        self.run_views(&views)
    }

    /// [`Program::run`] on the caller's arrays or views where they lie, without a copy of
    /// them.
    ///
    /// ```
    /// use ndarray::array;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("scale");
    /// let x = p.parameter::<f32>(&[2, 2]);
    /// let y = p.add(x, x, &[]).unwrap();
    /// p.output(y).unwrap();
    /// let a = array![[1.0f32, 2.0], [3.0, 4.0]];
    /// let out = p.run_views(&[a.t().into()]).unwrap(); // a transposed view, read in place
    /// assert_eq!(out[0], Tensor::from(array![[2.0f32, 6.0], [4.0, 8.0]].into_dyn()));
    /// ```
    ///
    /// # Errors
    /// As [`Program::run`].
    pub fn run_views(&self, inputs: &[TensorView<'_>]) -> Result<Vec<Tensor>> {
        // Inputs and constants are read where they are; a value is dropped after the last node
        // that reads it, unless it is an output; an output is moved out, copied only where it
        // is also an input, a constant or another output.
        let mut last_read = vec![0usize; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            for v in node.op.operands().into_iter().flatten() {
                last_read[v.index] = i;
            }
        }
        for v in &self.outputs {
            last_read[v.index] = usize::MAX;
        }
        let mut values = self.inputs("run", inputs)?;
        for (i, node) in self.nodes.iter().enumerate() {
            if values[i].is_some() {
                continue;
            }
            let value = match &node.op {
                Op::Constant(t) => Held::Read(t.read()),
                _ => {
                    let get =
                        |v: &Value| values[v.index].as_ref().expect("values are made in order");
                    Held::Owned(eval(node, &get)?)
                }
            };
            values[i] = Some(value);
            for v in node.op.operands().into_iter().flatten() {
                if last_read[v.index] == i {
                    values[v.index] = None;
                }
            }
        }
        let mut outputs = Vec::with_capacity(self.outputs.len());
        for (k, v) in self.outputs.iter().enumerate() {
            let again = self.outputs[k + 1..].contains(v);
            let value = match again {
                true => values[v.index].clone(),
                false => values[v.index].take(),
            };
            outputs.push(value.expect("every value was computed").into_owned());
        }
        Ok(outputs)
    }
}
