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
        let mut body = String::new();
        let mut next = 0usize;
        let mut fresh = |body: &mut String, line: String| -> String {
            let name = format!("%{next}");
            next += 1;
            let _ = writeln!(body, "    {name} = {line}");
            name
        };
        for (i, node) in self.nodes.iter().enumerate() {
            let out_ty = tensor_type(&node.shape, node.ty);
            // An operand placed at this node's shape: as it is, or through a broadcast_in_dim.
            let mut placed = |body: &mut String, v: Value, dims: &[usize]| -> String {
                let from = self.node(v);
                if from.shape == node.shape && dims.iter().copied().eq(0..dims.len()) {
                    return names[v.index].clone();
                }
                let to = tensor_type(&node.shape, from.ty);
                fresh(
                    body,
                    format!(
                        "stablehlo.broadcast_in_dim {}, dims = {:?} : ({}) -> {to}",
                        names[v.index],
                        dims,
                        tensor_type(&from.shape, from.ty)
                    ),
                )
            };
            let name = match &node.op {
                Op::Parameter => continue,
                Op::Constant(t) => {
                    let literal = t.visit_literal();
                    fresh(
                        &mut body,
                        format!("stablehlo.constant dense<{literal}> : {out_ty}"),
                    )
                }
                Op::BroadcastInDim { x, dims } => {
                    let (from, src) = (self.node(*x), names[x.index].clone());
                    fresh(
                        &mut body,
                        format!(
                            "stablehlo.broadcast_in_dim {src}, dims = {dims:?} : ({}) -> {out_ty}",
                            tensor_type(&from.shape, from.ty)
                        ),
                    )
                }
                Op::Binary {
                    op,
                    lhs,
                    rhs,
                    place: [l, r],
                } => {
                    let (a, b) = (placed(&mut body, *lhs, l), placed(&mut body, *rhs, r));
                    fresh(
                        &mut body,
                        format!("stablehlo.{} {a}, {b} : {out_ty}", op.names().1),
                    )
                }
                Op::Compare {
                    dir,
                    lhs,
                    rhs,
                    place: [l, r],
                } => {
                    let (a, b) = (placed(&mut body, *lhs, l), placed(&mut body, *rhs, r));
                    let in_ty = tensor_type(&node.shape, self.node(*lhs).ty);
                    let kind = match self.node(*lhs).ty.kind {
                        Kind::Float | Kind::Complex => "FLOAT",
                        Kind::Signed => "SIGNED",
                        Kind::Pred | Kind::Unsigned => "UNSIGNED",
                    };
                    fresh(
                        &mut body,
                        format!(
                            "stablehlo.compare  {}, {a}, {b},  {kind} : ({in_ty}, {in_ty}) -> {out_ty}",
                            dir.names().1
                        ),
                    )
                }
                Op::Select {
                    pred,
                    on_true,
                    on_false,
                } => {
                    let id = |v: Value| (0..self.node(v).shape.len()).collect::<Vec<usize>>();
                    let p = placed(&mut body, *pred, &id(*pred));
                    let t = placed(&mut body, *on_true, &id(*on_true));
                    let f = placed(&mut body, *on_false, &id(*on_false));
                    let p_ty = tensor_type(&node.shape, bool::TYPE);
                    fresh(
                        &mut body,
                        format!("stablehlo.select {p}, {t}, {f} : ({p_ty}, {out_ty}, {out_ty}) -> {out_ty}"),
                    )
                }
                Op::Clamp { min, x, max } => {
                    let bound = |v: Value| {
                        let n = self.node(v);
                        (names[v.index].clone(), tensor_type(&n.shape, n.ty))
                    };
                    let ((lo, lo_ty), (v, v_ty), (hi, hi_ty)) =
                        (bound(*min), bound(*x), bound(*max));
                    fresh(
                        &mut body,
                        format!("stablehlo.clamp {lo}, {v}, {hi} : ({lo_ty}, {v_ty}, {hi_ty}) -> {out_ty}"),
                    )
                }
                Op::ReduceInDim { x, dims } => {
                    self.emit_reduce(&mut body, &mut fresh, node, *x, dims, &names)
                }
                Op::Unary { op, x } => {
                    let src = self.node(*x);
                    let in_ty = tensor_type(&src.shape, src.ty);
                    let types = match in_ty == out_ty {
                        true => out_ty,
                        false => format!("({in_ty}) -> {out_ty}"),
                    };
                    fresh(
                        &mut body,
                        format!("stablehlo.{} {} : {types}", op.names().1, names[x.index]),
                    )
                }
                Op::Convert { x } => {
                    let in_ty = tensor_type(&self.node(*x).shape, self.node(*x).ty);
                    fresh(
                        &mut body,
                        format!(
                            "stablehlo.convert {} : ({in_ty}) -> {out_ty}",
                            names[x.index]
                        ),
                    )
                }
                Op::Reduce { op, x, axes } => {
                    let src = self.node(*x);
                    // The identity of the reduction for this type, as a literal of it.
                    let literal =
                        Tensor::identity(src.ty, *op).map_or(String::new(), |t| t.visit_literal());
                    let scalar = tensor_type(&[], node.ty);
                    let init = fresh(
                        &mut body,
                        format!("stablehlo.constant dense<{literal}> : {scalar}"),
                    );
                    let (_, region, pred) = op.names();
                    let region = if node.ty.kind == Kind::Pred {
                        pred
                    } else {
                        region
                    };
                    let mut dims = axes.clone();
                    dims.sort_unstable();
                    fresh(
                        &mut body,
                        format!(
                            "stablehlo.reduce({} init: {init}) applies stablehlo.{region} across dimensions = {dims:?} : ({}, {scalar}) -> {out_ty}",
                            names[x.index],
                            tensor_type(&src.shape, src.ty)
                        ),
                    )
                }
            };
            names[i] = name;
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
            "module @{}{attributes} {{\n  func.func public @main({}) -> ({}) {{\n{body}    return {} : {}\n  }}\n}}\n",
            self.name,
            args.join(", "),
            result_decls.join(", "),
            returned.join(", "),
            results.join(", ")
        )
    }

    /// A sum of `x` over the dims that fold, then a reshape (back the operand's size-1 dims)
    /// and a transpose (back its order) to the operand's shape.
    fn emit_reduce(
        &self,
        body: &mut String,
        fresh: &mut impl FnMut(&mut String, String) -> String,
        node: &Node,
        x: Value,
        dims: &[usize],
        names: &[String],
    ) -> String {
        let src = self.node(x);
        let operand = &node.shape;
        // Output dims that fold: not mapped, or mapped from a size-1 operand dim.
        let (mut folds, mut kept) = (Vec::new(), Vec::new());
        for d in 0..src.shape.len() {
            let folded = match dims.iter().position(|&m| m == d) {
                None => true,
                Some(i) => operand[i] != src.shape[d],
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
        let scalar = tensor_type(&[], node.ty);
        let init = fresh(body, format!("stablehlo.constant dense<{zero}> : {scalar}"));
        let reduced_ty = tensor_type(&kept, node.ty);
        let add = if node.ty.kind == Kind::Pred {
            "or"
        } else {
            "add"
        };
        let mut cur = fresh(
            body,
            format!(
                "stablehlo.reduce({} init: {init}) applies stablehlo.{add} across dimensions = {folds:?} : ({}, {scalar}) -> {reduced_ty}",
                names[x.index],
                tensor_type(&src.shape, src.ty)
            ),
        );
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
            let to = tensor_type(&sorted, node.ty);
            cur = fresh(
                body,
                format!(
                    "stablehlo.reshape {cur} : ({}) -> {to}",
                    tensor_type(&cur_shape, node.ty)
                ),
            );
            cur_shape = sorted;
        }
        // Where each of the operand's dims sits in `order`.
        let mut perm = vec![0; len];
        for (at, &i) in order.iter().enumerate() {
            perm[i] = at;
        }
        if !perm.iter().enumerate().all(|(k, &p)| p == k) {
            cur = fresh(
                body,
                format!(
                    "stablehlo.transpose {cur}, dims = {perm:?} : ({}) -> {}",
                    tensor_type(&cur_shape, node.ty),
                    tensor_type(operand, node.ty)
                ),
            );
        }
        cur
    }
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
