//! The StableHLO printer: a [`Program`] as the text XLA parses.

use std::fmt::Write as _;

use super::{ElementType, Kind, Node, Op, Program, StableHloElement, Tensor, Value};

impl Program {
    /// The program as StableHLO text: a module with one `func.func public @main` whose
    /// arguments are the parameters and whose results are the outputs, in StableHLO's pretty
    /// form as current XLA parses it (`dims = [..]` attributes).
    ///
    /// ```
    /// use xla_bcast::stablehlo::Program;
    ///
    /// let mut p = Program::new("bias");
    /// let x = p.parameter::<f32>(&[2, 3]);
    /// let b = p.parameter::<f32>(&[3]);
    /// let y = p.add(x, b, &[1]).unwrap();
    /// p.output(y).unwrap();
    /// let text = p.to_stablehlo();
    /// assert!(text.starts_with("module @bias {"));
    /// assert!(text.contains("stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>"));
    /// assert!(text.contains("stablehlo.add"));
    /// ```
    pub fn to_stablehlo(&self) -> String {
        let ty = |v: Value| tensor_type(&self.node(v).shape, self.node(v).ty);
        let mut names: Vec<String> = vec![String::new(); self.nodes.len()];
        for (k, p) in self.params.iter().enumerate() {
            names[p.index] = format!("%arg{k}");
        }
        let mut args = Vec::with_capacity(self.params.len());
        for &p in &self.params {
            let sharding = self.sharding_attr(p.index).unwrap_or_default();
            args.push(format!("{}: {}{sharding}", names[p.index], ty(p)));
        }
        let (mut results, mut result_decls) = (Vec::new(), Vec::new());
        for &v in &self.outputs {
            let sharding = self.sharding_attr(v.index).unwrap_or_default();
            result_decls.push(format!("{}{sharding}", ty(v)));
            results.push(ty(v));
        }
        let mut text = Text::default();
        for (i, node) in self.nodes.iter().enumerate() {
            if let Some(name) = self.emit(&mut text, node, &names) {
                names[i] = name;
            }
        }
        let mut returned = Vec::with_capacity(self.outputs.len());
        for v in &self.outputs {
            returned.push(names[v.index].clone());
        }
        // A sharded program says how many devices it spans; one without, nothing.
        let attributes = match (&self.mesh, self.shardings.is_empty()) {
            (Some(mesh), false) => format!(
                " attributes {{mhlo.num_partitions = {} : i32, mhlo.num_replicas = 1 : i32}}",
                mesh.devices()
            ),
            _ => String::new(),
        };
        format!(
            "module @{}{attributes} {{\n  func.func public @main({}) -> ({}) {{\n{}    return {} : {}\n  }}\n}}\n",
            self.name,
            args.join(", "),
            result_decls.join(", "),
            text.body,
            returned.join(", "),
            results.join(", ")
        )
    }

    /// `node`'s lines, each value named by [`Text::line`]; the name of its result (`None` for
    /// a parameter, which is named already). `names` holds every earlier node's.
    fn emit(&self, t: &mut Text, node: &Node, names: &[String]) -> Option<String> {
        let out_ty = tensor_type(&node.shape, node.ty);
        // An operand placed at this node's shape: as it is, or through a broadcast_in_dim.
        let placed = |t: &mut Text, v: Value, dims: &[usize]| -> String {
            let from = self.node(v);
            if from.shape == node.shape && dims.iter().copied().eq(0..dims.len()) {
                return names[v.index].clone();
            }
            let to = tensor_type(&node.shape, from.ty);
            let from_ty = tensor_type(&from.shape, from.ty);
            let src = &names[v.index];
            t.line(format!(
                "stablehlo.broadcast_in_dim {src}, dims = {dims:?} : ({from_ty}) -> {to}"
            ))
        };
        let typed = |v: Value| {
            (
                &names[v.index],
                tensor_type(&self.node(v).shape, self.node(v).ty),
            )
        };
        let line = match &node.op {
            Op::Parameter => return None,
            Op::Constant(t) => format!("stablehlo.constant dense<{}> : {out_ty}", dense(t)),
            Op::Iota { dim } => format!("stablehlo.iota dim = {dim} : {out_ty}"),
            Op::ArgReduce { max, x, axis } => {
                return Some(t.arg_reduce(*max, typed(*x), self.node(*x), *axis, node, &out_ty))
            }
            Op::BroadcastInDim { x, dims } => {
                let (src, from_ty) = typed(*x);
                format!(
                    "stablehlo.broadcast_in_dim {src}, dims = {dims:?} : ({from_ty}) -> {out_ty}"
                )
            }
            Op::Binary {
                op,
                lhs,
                rhs,
                place: [l, r],
            } => {
                let (a, b) = (placed(t, *lhs, l), placed(t, *rhs, r));
                format!("stablehlo.{} {a}, {b} : {out_ty}", op.names().1)
            }
            Op::Compare {
                dir,
                lhs,
                rhs,
                place: [l, r],
            } => {
                let (a, b) = (placed(t, *lhs, l), placed(t, *rhs, r));
                let in_ty = tensor_type(&node.shape, self.node(*lhs).ty);
                let kind = match self.node(*lhs).ty.kind {
                    Kind::Float | Kind::Complex => "FLOAT",
                    Kind::Signed => "SIGNED",
                    Kind::Pred | Kind::Unsigned => "UNSIGNED",
                };
                let dir = dir.names().1;
                format!(
                    "stablehlo.compare  {dir}, {a}, {b},  {kind} : ({in_ty}, {in_ty}) -> {out_ty}"
                )
            }
            Op::Select {
                pred,
                on_true,
                on_false,
            } => {
                let id = |v: Value| (0..self.node(v).shape.len()).collect::<Vec<usize>>();
                let p = placed(t, *pred, &id(*pred));
                let on_t = placed(t, *on_true, &id(*on_true));
                let on_f = placed(t, *on_false, &id(*on_false));
                let p_ty = tensor_type(&node.shape, bool::TYPE);
                format!("stablehlo.select {p}, {on_t}, {on_f} : ({p_ty}, {out_ty}, {out_ty}) -> {out_ty}")
            }
            Op::Clamp { min, x, max } => {
                let ((lo, lo_ty), (v, v_ty), (hi, hi_ty)) = (typed(*min), typed(*x), typed(*max));
                format!("stablehlo.clamp {lo}, {v}, {hi} : ({lo_ty}, {v_ty}, {hi_ty}) -> {out_ty}")
            }
            Op::ReduceInDim { x, dims } => return Some(self.emit_reduce(t, node, *x, dims, names)),
            Op::Unary { op, x } => {
                let (src, in_ty) = typed(*x);
                let types = match in_ty == out_ty {
                    true => out_ty,
                    false => format!("({in_ty}) -> {out_ty}"),
                };
                format!("stablehlo.{} {src} : {types}", op.names().1)
            }
            Op::Convert { x } => {
                let (src, in_ty) = typed(*x);
                format!("stablehlo.convert {src} : ({in_ty}) -> {out_ty}")
            }
            Op::Reduce { op, x, axes } => {
                // The identity of the reduction for this type, as a literal of it.
                let src = self.node(*x);
                let literal =
                    Tensor::identity(src.ty, *op).map_or(String::new(), |t| t.visit_literal());
                let (_, region, pred) = op.names();
                let region = if node.ty.kind == Kind::Pred {
                    pred
                } else {
                    region
                };
                let mut dims = axes.clone();
                dims.sort_unstable();
                t.reduce(typed(*x), &literal, region, &dims, node.ty, &out_ty)
            }
        };
        Some(t.line(line))
    }

    /// `reduce_in_dim` (the adjoint of `broadcast_in_dim`): a sum over the dims that fold, then
    /// a reshape and a transpose into `node`'s shape where its dims come in another order.
    fn emit_reduce(
        &self,
        t: &mut Text,
        node: &Node,
        x: Value,
        dims: &[usize],
        names: &[String],
    ) -> String {
        let src = self.node(x);
        let shape = &node.shape;
        // Output dims that fold: not mapped, or mapped from a size-1 operand dim.
        let (mut folds, mut kept) = (Vec::new(), Vec::new());
        for d in 0..src.shape.len() {
            let folded = match dims.iter().position(|&m| m == d) {
                None => true,
                Some(i) => shape[i] != src.shape[d],
            };
            match folded {
                true => folds.push(d),
                false => kept.push(src.shape[d]),
            }
        }
        let zero = match node.ty.kind {
            Kind::Pred => "false".to_string(),
            Kind::Signed | Kind::Unsigned => "0".to_string(),
            Kind::Float => "0.000000e+00".to_string(),
            Kind::Complex => "(0.000000e+00,0.000000e+00)".to_string(),
        };
        let reduced_ty = tensor_type(&kept, node.ty);
        let add = if node.ty.kind == Kind::Pred {
            "or"
        } else {
            "add"
        };
        let operand = (&names[x.index], tensor_type(&src.shape, src.ty));
        let line = t.reduce(operand, &zero, add, &folds, node.ty, &reduced_ty);
        let mut cur = t.line(line);
        let operand = &node.shape;
        // The operand's dims in the order they sit in the output, then back to its own order.
        // (Sorted as keys `dims[i] * len + i`, so that the crate compiles one sort of indices.)
        let len = operand.len();
        let mut order = Vec::with_capacity(len);
        for (i, &d) in dims.iter().enumerate() {
            order.push(d * len + i);
        }
        order.sort_unstable();
        let mut sorted = Vec::with_capacity(len);
        for k in &mut order {
            *k %= len;
            sorted.push(operand[*k]);
        }
        let mut cur_shape = kept;
        if cur_shape != sorted {
            let (from, to) = (
                tensor_type(&cur_shape, node.ty),
                tensor_type(&sorted, node.ty),
            );
            cur = t.line(format!("stablehlo.reshape {cur} : ({from}) -> {to}"));
            cur_shape = sorted;
        }
        // Where each of the operand's dims sits in `order`.
        let mut perm = vec![0; len];
        for (at, &i) in order.iter().enumerate() {
            perm[i] = at;
        }
        if !perm.iter().enumerate().all(|(k, &p)| p == k) {
            let (from, to) = (
                tensor_type(&cur_shape, node.ty),
                tensor_type(operand, node.ty),
            );
            cur = t.line(format!(
                "stablehlo.transpose {cur}, dims = {perm:?} : ({from}) -> {to}"
            ));
        }
        cur
    }
}

/// A function body as it is printed: its lines, and the number of the next value.
#[derive(Default)]
struct Text {
    body: String,
    next: usize,
}

impl Text {
    /// `line` as the next value, `%N = line`; its name `%N`.
    fn line(&mut self, line: String) -> String {
        let name = format!("%{}", self.next);
        self.next += 1;
        let _ = writeln!(self.body, "    {name} = {line}");
        name
    }

    /// A `stablehlo.reduce` of `operand` (its name and type) over `dims` by `region` from the
    /// scalar `identity` (written as the next value), into `out_ty`: the reduce's line.
    fn reduce(
        &mut self,
        (src, src_ty): (&String, String),
        identity: &str,
        region: &str,
        dims: &[usize],
        ty: ElementType,
        out_ty: &str,
    ) -> String {
        let scalar = tensor_type(&[], ty);
        let init = self.line(format!("stablehlo.constant dense<{identity}> : {scalar}"));
        format!(
            "stablehlo.reduce({src} init: {init}) applies stablehlo.{region} across dimensions = {dims:?} : ({src_ty}, {scalar}) -> {out_ty}"
        )
    }
}

impl Text {
    /// `argmin` (`argmax` with `max`) of `x` (its name and type; `src` its node) over `axis`
    /// into `node`'s indices: XLA's reduce of the values and an iota of indices, whose region
    /// keeps the pair that comes first in the total order (NaN first, then the extreme, then
    /// the lower index), so that any order of reduction gives the same index. Its result.
    fn arg_reduce(
        &mut self,
        max: bool,
        (src, src_ty): (&String, String),
        x: &Node,
        axis: usize,
        node: &Node,
        out_ty: &str,
    ) -> String {
        let (v, i) = (tensor_type(&[], x.ty), tensor_type(&[], node.ty));
        let iota = self.line(format!(
            "stablehlo.iota dim = {axis} : {}",
            tensor_type(&x.shape, node.ty)
        ));
        let extreme = if max {
            super::Reduction::Max
        } else {
            super::Reduction::Min
        };
        let start = Tensor::identity(x.ty, extreme).map_or(String::new(), |t| t.visit_literal());
        let init_v = self.line(format!("stablehlo.constant dense<{start}> : {v}"));
        let init_i = self.line(format!("stablehlo.constant dense<0> : {i}"));
        let name = format!("%{}", self.next);
        self.next += 1;
        let r = |k: usize| format!("%r{}_{k}", &name[1..]);
        let (a, c, b, d) = (r(0), r(1), r(2), r(3));
        let kind = |t: ElementType| match t.kind {
            Kind::Float => "FLOAT",
            Kind::Signed => "SIGNED",
            _ => "UNSIGNED",
        };
        let mut region = Vec::new();
        let mut op = |line: String| {
            let at = r(4 + region.len());
            region.push(format!("      {at} = {line}"));
            at
        };
        let cmp = |dir: &str, p: &str, q: &str, t: ElementType, ty: &str| {
            format!(
                "stablehlo.compare  {dir}, {p}, {q},  {} : ({ty}, {ty}) -> tensor<i1>",
                kind(t)
            )
        };
        let bool2 = |f: &str, p: &str, q: &str| format!("stablehlo.{f} {p}, {q} : tensor<i1>");
        let beats = op(cmp(if max { "GT" } else { "LT" }, &a, &c, x.ty, &v));
        let equal = op(cmp("EQ", &a, &c, x.ty, &v));
        let (beats, equal) = match x.ty.kind {
            Kind::Float => {
                let a_nan = op(cmp("NE", &a, &a, x.ty, &v));
                let c_nan = op(cmp("NE", &c, &c, x.ty, &v));
                let c_num = op(cmp("EQ", &c, &c, x.ty, &v));
                let nan_beats = op(bool2("and", &a_nan, &c_num));
                let both_nan = op(bool2("and", &a_nan, &c_nan));
                (
                    op(bool2("or", &beats, &nan_beats)),
                    op(bool2("or", &equal, &both_nan)),
                )
            }
            _ => (beats, equal),
        };
        let first = op(cmp("LT", &b, &d, node.ty, &i));
        let tie_first = op(bool2("and", &equal, &first));
        let keep = op(bool2("or", &beats, &tie_first));
        let sel = |p: &str, q: &str, ty: &str| {
            format!("stablehlo.select {keep}, {p}, {q} : (tensor<i1>, {ty}, {ty}) -> {ty}")
        };
        let (value, index) = (sel(&a, &c, &v), sel(&b, &d, &i));
        let (value, index) = (op(value), op(index));
        let (kept_v, kept_i) = (tensor_type(&node.shape, x.ty), out_ty);
        let _ = writeln!(
            self.body,
            "    {name}:2 = stablehlo.reduce({src} init: {init_v}), ({iota} init: {init_i}) across dimensions = [{axis}] : ({src_ty}, {}, {v}, {i}) -> ({kept_v}, {kept_i})\n     reducer({a}: {v}, {c}: {v}) ({b}: {i}, {d}: {i})  {{\n{}\n      stablehlo.return {value}, {index} : {v}, {i}\n    }}",
            tensor_type(&x.shape, node.ty),
            region.join("\n")
        );
        format!("{name}#1")
    }
}

/// A constant's elements as a `dense<..>` literal: one value for a rank-0 tensor or a splat,
/// else nested lists, one per dim.
fn dense(t: &Tensor) -> String {
    let literals = t.literals();
    if literals.iter().all(|l| Some(l) == literals.first()) && !literals.is_empty() {
        return literals[0].clone();
    }
    fn nest(out: &mut String, shape: &[usize], items: &mut std::slice::Iter<'_, String>) {
        let Some((&n, rest)) = shape.split_first() else {
            out.push_str(items.next().map_or("", |s| s));
            return;
        };
        out.push('[');
        for k in 0..n {
            out.push_str(if k > 0 { ", " } else { "" });
            nest(out, rest, items);
        }
        out.push(']');
    }
    let mut out = String::new();
    nest(&mut out, t.shape(), &mut literals.iter());
    out
}

/// `tensor<2x3xf32>`, `tensor<f32>` for rank 0.
fn tensor_type(shape: &[usize], ty: ElementType) -> String {
    let mut s = String::from("tensor<");
    for n in shape {
        let _ = write!(s, "{n}x");
    }
    s.push_str(ty.name);
    s.push('>');
    s
}
