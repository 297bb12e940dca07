//! The StableHLO printer: a [`Program`] as the text XLA parses.

use std::fmt::Write as _;

use super::{
    ElementType, Kind, Node, Op, Program, Reduction, ShardingDialect, StableHloElement, Tensor,
    Value,
};

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
    ///
    /// A sharded program's shardings are in Shardy's dialect ([`sharding`](super::sharding)).
    pub fn to_stablehlo(&self) -> String {
        self.to_stablehlo_with(ShardingDialect::Shardy)
    }

    /// [`Program::to_stablehlo`], its shardings in `dialect`: GSPMD's for an XLA that predates
    /// Shardy ([`ShardingDialect`] shows both). The rest of the text is the same.
    ///
    /// ```
    /// use xla_bcast::stablehlo::{Program, ShardingDialect};
    /// let mut p = Program::new("plain"); // no shardings: one text in either dialect
    /// let x = p.parameter::<f32>(&[2]);
    /// p.output(x).unwrap();
    /// assert_eq!(p.to_stablehlo_with(ShardingDialect::Gspmd), p.to_stablehlo());
    /// ```
    pub fn to_stablehlo_with(&self, dialect: ShardingDialect) -> String {
        let ty = |v: Value| tensor_type(&self.node(v).shape, self.node(v).ty);
        let mut names: Vec<String> = vec![String::new(); self.nodes.len()];
        for (k, p) in self.params.iter().enumerate() {
            names[p.index] = format!("%arg{k}");
        }
        let mut args = Vec::with_capacity(self.params.len());
        for &p in &self.params {
            let sharding = self.sharding_of(p.index, dialect, None).unwrap_or_default();
            args.push(format!("{}: {}{sharding}", names[p.index], ty(p)));
        }
        let (mut results, mut result_decls) = (Vec::new(), Vec::new());
        for &v in &self.outputs {
            let sharding = self.sharding_of(v.index, dialect, None).unwrap_or_default();
            result_decls.push(format!("{}{sharding}", ty(v)));
            results.push(ty(v));
        }
        let mut text = Text::default();
        for (i, node) in self.nodes.iter().enumerate() {
            if let Some(name) = self.emit(&mut text, node, &names) {
                names[i] = name;
                // A value neither a parameter nor an output is pinned where it is made.
                if !self.outputs.iter().any(|o| o.index == i) {
                    let ty = tensor_type(&node.shape, node.ty);
                    if let Some(pin) = self.sharding_of(i, dialect, Some((&names[i], &ty))) {
                        names[i] = text.line(pin);
                    }
                }
            }
        }
        let mut returned = Vec::with_capacity(self.outputs.len());
        for v in &self.outputs {
            returned.push(names[v.index].clone());
        }
        // A sharded program says how many devices it spans (and in Shardy's dialect, declares
        // its mesh); one without, nothing.
        let (attributes, mesh) = match (&self.mesh, self.shardings.is_empty()) {
            (Some(mesh), false) => (
                format!(
                    " attributes {{mhlo.num_partitions = {} : i32, mhlo.num_replicas = 1 : i32}}",
                    mesh.devices()
                ),
                match dialect {
                    ShardingDialect::Shardy => format!("  {}\n", mesh.sdy()),
                    ShardingDialect::Gspmd => String::new(),
                },
            ),
            _ => (String::new(), String::new()),
        };
        format!(
            "module @{}{attributes} {{\n{mesh}  func.func public @main({}) -> ({}) {{\n{}    return {} : {}\n  }}\n}}\n",
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
                let mut dims = axes.clone();
                dims.sort_unstable();
                t.reduce(typed(*x), *op, &dims, node.ty, &out_ty)
            }
            Op::ReduceInDim { x, dims } => {
                // A sum over the operand's dims that fold (not mapped, or mapped onto a size-1
                // dim from a longer one), then the kept ones placed where `dims` maps them.
                let src = self.node(*x);
                let (mut folds, mut kept, mut to) = (Vec::new(), Vec::new(), Vec::new());
                for (d, &n) in src.shape.iter().enumerate() {
                    match dims.iter().position(|&m| m == d) {
                        Some(i) if node.shape[i] == n => (kept.push(n), to.push(i)),
                        _ => (folds.push(d), ()),
                    };
                }
                let kept_ty = tensor_type(&kept, node.ty);
                let line = t.reduce(typed(*x), Reduction::Sum, &folds, node.ty, &kept_ty);
                if kept == node.shape && to.iter().copied().eq(0..to.len()) {
                    line
                } else {
                    let sum = t.line(line);
                    format!(
                        "stablehlo.broadcast_in_dim {sum}, dims = {to:?} : ({kept_ty}) -> {out_ty}"
                    )
                }
            }
        };
        Some(t.line(line))
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

    /// A `stablehlo.reduce` of `operand` (its name and type) over `dims` by reduction `op`
    /// (its region; `bool`'s for `ty` `bool`) from its identity (written as the next value),
    /// into `out_ty`: the reduce's line.
    fn reduce(
        &mut self,
        (src, src_ty): (&String, String),
        op: Reduction,
        dims: &[usize],
        ty: ElementType,
        out_ty: &str,
    ) -> String {
        let identity = Tensor::identity(ty, op).map_or(String::new(), |t| t.visit_literal());
        let (_, region, pred) = op.names();
        let region = if ty.kind == Kind::Pred { pred } else { region };
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
        let extreme = if max { Reduction::Max } else { Reduction::Min };
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
