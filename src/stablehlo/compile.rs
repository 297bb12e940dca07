//! [`Program::compile`]: the program's ops grouped into chains that make one pass over memory,
//! run by the engine's row executor ([`crate::engine::rows`]) a tile at a time, their
//! intermediates in per-thread buffers.
//!
//! First, reductions over the last dim gather the elementwise nodes around them into row
//! chains (`Program::row_chains`): the nodes at the reduced shape's full shape and, per row,
//! at its outer shape, so that a layer norm, a softmax or attention scores run a tile of rows
//! through every step. Then the other elementwise nodes of
//! one shape whose operands are computed before them (or among them) join a group, a chain
//! without folds. A chain closes when something outside it reads one of its members (a
//! reduction over another dim, another shape's chain): that member is then written to an
//! array, and so is every program output.
//! `broadcast_in_dim` is a stride-0 read of its operand, never a copy. Other reductions run as
//! in [`Program::run`]. The kernels and folds are those of `Program::run`, so the results are
//! its own, bit for bit. A chain of one op runs on the engine's walk, as the op called
//! directly does.

use std::sync::Mutex;

use super::eval::{eval, kernel, mismatch, placements, Placements};
use super::{ElementType, Held, Op, Program, Tensor, TensorView, TensorViewMut, Unwritten, Value};
use crate::engine::rows::{self, RowStep, MAX_OPERANDS};
use crate::engine::table::Kernel;
use crate::engine::Operand;
use crate::engine::Strides;
use crate::error::{BroadcastError, Result};
use crate::shape::iota;

/// A compiled [`Program`]: run it with [`Executable::run`] or, writing into the caller's arrays,
/// [`Executable::run_into`]. It keeps the large intermediates of its runs (arrays that
/// reductions split a chain at, 128 KiB or more) for the next run to write over, until it is
/// dropped: memory a training loop would otherwise map afresh at each step.
///
/// ```
/// use ndarray::{arr1, arr2};
/// use xla_bcast::stablehlo::{Program, Tensor};
///
/// // relu(x + b): one pass, `b` read as a broadcast row.
/// let mut p = Program::new("bias_relu");
/// let x = p.parameter::<f32>(&[2, 3]);
/// let b = p.parameter::<f32>(&[3]);
/// let s = p.add(x, b, &[1]).unwrap();
/// let zero = p.constant(0.0f32);
/// let y = p.max(s, zero, &[]).unwrap();
/// p.output(y).unwrap();
/// let exe = p.compile().unwrap();
/// let inputs = [
///     arr2(&[[1.0f32, -2.0, 3.0], [-4.0, 5.0, -6.0]]).into_dyn().into(),
///     arr1(&[0.5f32, 0.5, 0.5]).into_dyn().into(),
/// ];
/// let out = exe.run(&inputs).unwrap();
/// assert_eq!(out[0], Tensor::from(arr2(&[[1.5f32, 0.0, 3.5], [0.0, 5.5, 0.0]]).into_dyn()));
/// assert_eq!(out, p.run(&inputs).unwrap());
/// ```
#[derive(Debug, Clone)]
pub struct Executable {
    program: Program,
    stages: Vec<Stage>,
    /// For each stage, the values it reads for the last time (dropped after it, unless they
    /// are outputs).
    drops: Vec<Vec<usize>>,
    scratch: Scratch,
}

/// The large intermediates of earlier runs, kept for the next run's chains to write over
/// (XLA's executables reuse their temporary buffers too): an array of [`SCRATCH_MIN_BYTES`] or
/// more is mapped afresh by the allocator at each call, and on a VM each of its pages faults
/// on first touch, which can cost as much as the loop that writes it. A run takes an array of
/// the type, shape and layout it would allocate, and gives back the ones it no longer reads;
/// concurrent runs each allocate what they do not find. A clone starts empty.
#[derive(Default)]
struct Scratch(Mutex<Vec<Tensor>>);

/// Intermediates smaller than this are allocated at each run: the allocator serves them from
/// memory it keeps (glibc's default threshold for mapping an allocation of its own).
const SCRATCH_MIN_BYTES: usize = 128 << 10;

/// The most arrays kept between runs.
const SCRATCH_MAX: usize = 16;

/// How many arrays are kept, not their elements.
impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().map_or(0, |k| k.len());
        write!(f, "Scratch({kept} arrays kept)")
    }
}

impl Clone for Scratch {
    fn clone(&self) -> Self {
        Scratch::default()
    }
}

impl Scratch {
    /// An array kept of type `ty`, `shape` and `strides`, if there is one.
    fn take(&self, ty: ElementType, shape: &[usize], strides: &[isize]) -> Option<Tensor> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let at = kept
            .iter()
            .position(|t| t.element_type() == ty && t.shape() == shape && t.strides() == strides)?;
        Some(kept.swap_remove(at))
    }

    /// Keeps `t` for a later run, if it is large enough to be worth keeping and there is room.
    fn give(&self, t: Tensor) {
        let bytes = t.shape().iter().product::<usize>() * t.element_type().size();
        if bytes >= SCRATCH_MIN_BYTES {
            let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if kept.len() < SCRATCH_MAX {
                kept.push(t);
            }
        }
    }
}

/// An array a chain writes a member to: fresh, or kept from an earlier run.
enum Member {
    Fresh(Unwritten),
    Kept(Tensor),
}

/// One step of an executable.
#[derive(Debug, Clone)]
enum Stage {
    /// A node evaluated as [`Program::run`] does (a reduction).
    Node(usize),
    /// A chain of elementwise ops and reductions over the last dim or leading dims.
    Rows(Box<Rows>),
}

/// A chain over `shape`: the members are at `shape` (full) or at the dims its folds keep (per
/// row: `shape` without its last dim, or, folding leading dims, its trailing dims).
/// Registers `0..inputs.len()` read the inputs (a value placed by dims at `shape`, or per row
/// at the kept dims), the next `outputs.len()` are the members written to arrays, the rest the
/// members kept in the tile's buffers, one each.
#[derive(Debug, Clone)]
struct Rows {
    shape: Vec<usize>,
    members: Vec<usize>,
    /// For each member, its operands and the dims that place them at its shape.
    reads: Vec<Placements>,
    inputs: Vec<RowInput>,
    outputs: Vec<usize>,
    /// For each of `outputs`, the program output it may be written to in place by
    /// [`Executable::run_into`]: one that is output once. One that a later stage reads is
    /// written there only when the caller's array is laid out as `Program::run` lays out the
    /// value (a later reduction folds in an order its layout decides), and is lent to those
    /// stages as the value.
    direct: Vec<Option<usize>>,
    /// For each of `outputs`, whether nothing after the chain reads it.
    last_use: Vec<bool>,
    per_row: Vec<bool>,
    sizes: Vec<usize>,
    steps: Vec<RowStep>,
    /// The rank-0 tensors the folds start from.
    identities: Vec<Tensor>,
}

/// A value read by a row chain: placed by `dims` at the chain's shape, or per row at its outer
/// shape.
#[derive(Debug, Clone, PartialEq)]
struct RowInput {
    value: usize,
    dims: Vec<usize>,
    per_row: bool,
}

/// Whether a reduction over `axes` of a value of rank `rank` folds its rows (the last dim),
/// which a row chain can take.
fn folds_rows(axes: &[usize], rank: usize) -> bool {
    rank > 0 && axes == [rank - 1]
}

/// A chain while the program is read: a row chain ([`Program::row_chains`]) or a group of
/// elementwise nodes at one shape ([`Program::order_stages`]).
struct Building {
    shape: Vec<usize>,
    members: Vec<usize>,
    /// Its first member: every value a row chain reads from outside comes before it.
    first: usize,
    folds: usize,
    /// The values a group's members read from outside it, each with its placement (its loop's
    /// inputs).
    inputs: Vec<(usize, Vec<usize>)>,
    /// A bound on the operands a group's loop will have: its inputs, and each member (an
    /// output if read outside the group).
    operands: usize,
    /// A group that takes more members.
    open: bool,
}

impl Building {
    /// A chain at `shape` that starts at node `first`, a group when `open`.
    fn new(shape: &[usize], first: usize, open: bool) -> Self {
        Building {
            shape: shape.to_vec(),
            members: Vec::new(),
            first,
            folds: 0,
            inputs: Vec::new(),
            operands: 0,
            open,
        }
    }
}

/// Stages in the order they run ([`Program::order_stages`]): a node (`Ok`) or a chain (`Err`).
type Order = Vec<Result<usize, usize>>;

/// A chain's members written to arrays (`needed`), and the others, each in order.
fn split_needed(members: &[usize], needed: &[bool]) -> (Vec<usize>, Vec<usize>) {
    let (mut outputs, mut temps) = (Vec::new(), Vec::new());
    for &m in members {
        match needed[m] {
            true => outputs.push(m),
            false => temps.push(m),
        }
    }
    (outputs, temps)
}

/// Whether the node is elementwise at its shape (a member of a chain).
fn fusible(op: &Op) -> bool {
    matches!(
        op,
        Op::Binary { .. }
            | Op::Compare { .. }
            | Op::Select { .. }
            | Op::Clamp { .. }
            | Op::Unary { .. }
            | Op::Convert { .. }
            | Op::BroadcastInDim { .. }
    )
}

impl Program {
    /// The program compiled for [`Executable::run`]: its elementwise ops, and its reductions over
    /// the last dim with the ops around them, grouped into chains that make one pass over
    /// memory each, their intermediates in per-thread buffers (see [`Executable`]). The results
    /// are [`Program::run`]'s, bit for bit.
    ///
    /// ```
    /// use ndarray::arr1;
    /// use xla_bcast::stablehlo::Program;
    ///
    /// let mut p = Program::new("chain");
    /// let x = p.parameter::<f32>(&[3]);
    /// let e = p.exp(x).unwrap();
    /// let y = p.tanh(e).unwrap(); // `exp` and `tanh` in one loop
    /// p.output(y).unwrap();
    /// let exe = p.compile().unwrap();
    /// let inputs = [arr1(&[0.0f32, 1.0, -2.0]).into_dyn().into()];
    /// assert_eq!(exe.run(&inputs).unwrap(), p.run(&inputs).unwrap());
    /// assert!(Program::new("empty").compile().is_err()); // nothing to compute
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::ElementType`] for a program with no outputs.
    pub fn compile(&self) -> Result<Executable> {
        if self.outputs.is_empty() {
            return Err(BroadcastError::ElementType {
                op: "compile",
                types: String::new(),
                reason: "the program has no outputs".to_string(),
            });
        }
        let n = self.nodes.len();
        let mut chains = self.row_chains();
        let mut chain_of: Vec<Option<usize>> = vec![None; n];
        for (r, b) in chains.iter().enumerate() {
            for &m in &b.members {
                chain_of[m] = Some(r);
            }
        }
        let order = self.order_stages(&mut chains, &mut chain_of)?;
        // Which members are written to arrays: outputs, and those read outside their chain.
        let mut needed = vec![false; n];
        for v in &self.outputs {
            needed[v.index] = true;
        }
        for (i, node) in self.nodes.iter().enumerate() {
            for v in node.op.operands().into_iter().flatten() {
                if chain_of[v.index].is_some() && chain_of[v.index] != chain_of[i] {
                    needed[v.index] = true;
                }
            }
        }
        let mut stages = Vec::with_capacity(order.len());
        for stage in order {
            stages.push(match stage {
                Ok(i) => Stage::Node(i),
                Err(c) => {
                    let (members, shape) = (&chains[c].members, &chains[c].shape);
                    Stage::Rows(Box::new(self.chain(members, shape, &needed)?))
                }
            });
        }
        // Members written straight into the caller's arrays by `run_into`: outputs once, read
        // by no later stage.
        let mut reads = Vec::with_capacity(stages.len());
        for stage in &stages {
            reads.push(self.stage_reads(stage));
        }
        // The program's output slot that holds member `m`, when exactly one slot does.
        let direct_of = |m: usize| {
            let mut slots = (0..self.outputs.len()).filter(|&k| self.outputs[k].index == m);
            let k = slots.next()?;
            slots.next().is_none().then_some(k)
        };
        for stage in &mut stages {
            if let Stage::Rows(r) = stage {
                for (k, &m) in r.outputs.iter().enumerate() {
                    r.direct[k] = direct_of(m);
                    r.last_use[k] = !reads.iter().any(|read| read.contains(&m));
                }
            }
        }
        // The last stage that reads each value.
        let mut last: Vec<Option<usize>> = vec![None; n];
        for (s, stage) in stages.iter().enumerate() {
            for v in self.stage_reads(stage) {
                last[v] = Some(s);
            }
        }
        let mut drops = vec![Vec::new(); stages.len()];
        for (v, s) in last.iter().enumerate() {
            if let Some(s) = *s {
                if !self.outputs.iter().any(|o| o.index == v) {
                    drops[s].push(v);
                }
            }
        }
        Ok(Executable {
            program: self.clone(),
            stages,
            drops,
            scratch: Scratch::default(),
        })
    }

    /// The stages in the order they run, each a node or a chain: the row `chains` (each node's
    /// in `chain_of`), and the groups of elementwise nodes this adds to them.
    fn order_stages(
        &self,
        chains: &mut Vec<Building>,
        chain_of: &mut [Option<usize>],
    ) -> Result<Order> {
        let mut order: Order = Vec::new();
        let close = |g: usize, chains: &mut Vec<Building>, order: &mut Order| {
            if chains[g].open {
                chains[g].open = false;
                order.push(Err(g));
            }
        };
        for (i, node) in self.nodes.iter().enumerate() {
            if let Some(r) = chain_of[i] {
                // A row chain runs where its first member stands, after the chains it reads.
                if chains[r].first == i {
                    for m in chains[r].members.clone() {
                        for v in self.nodes[m].op.operands().into_iter().flatten() {
                            if let Some(g) = chain_of[v.index] {
                                close(g, chains, &mut order);
                            }
                        }
                    }
                    order.push(Err(r));
                }
                continue;
            }
            let operands = node.op.operands();
            if !fusible(&node.op) {
                // A reduction reads its operand as an array: its group closes before it.
                for v in operands.into_iter().flatten() {
                    if let Some(g) = chain_of[v.index] {
                        close(g, chains, &mut order);
                    }
                }
                if !matches!(node.op, Op::Parameter | Op::Constant(_)) {
                    order.push(Ok(i));
                }
                continue;
            }
            // Operands read as registers: members of an open group of this shape, at their own
            // shape (broadcast_in_dim reads its operand through a view: never a register).
            let register = |v: &Value| {
                !matches!(node.op, Op::BroadcastInDim { .. })
                    && self.nodes[v.index].shape == node.shape
            };
            let mut home: Option<usize> = None;
            for v in operands.into_iter().flatten() {
                let Some(g) = chain_of[v.index] else { continue };
                if !chains[g].open {
                    continue;
                }
                if !register(&v) || home.is_some_and(|h| h != g) {
                    // Read from outside the group: it is written to an array first.
                    close(g, chains, &mut order);
                } else {
                    home = Some(g);
                }
            }
            let home = home.filter(|&g| chains[g].open).or_else(|| {
                // No operand in a group: the latest open group of this shape takes it.
                (0..chains.len())
                    .rev()
                    .find(|&g| chains[g].open && chains[g].shape == node.shape)
            });
            // A group's operands (inputs and outputs) are bounded: a member adds at most itself
            // (an output, if read outside) and the values it reads from outside the group, as
            // each is placed, that no member read so before (inputs); one it reads from inside
            // is a register.
            let placed = self.placements(i)?;
            let new_inputs = |chains: &[Building], g: usize| {
                let mut new = Vec::new();
                for (v, dims) in &placed {
                    let key = (v.index, dims.clone());
                    let outside = chain_of[v.index] != Some(g);
                    if outside && !chains[g].inputs.contains(&key) && !new.contains(&key) {
                        new.push(key);
                    }
                }
                new
            };
            let fits = |g: usize| {
                let new = new_inputs(chains, g).len();
                chains[g].operands + 1 + new <= MAX_OPERANDS
            };
            let g = match home.filter(|&g| fits(g)) {
                Some(g) => g,
                None => {
                    if let Some(g) = home {
                        close(g, chains, &mut order);
                    }
                    chains.push(Building::new(&node.shape, i, true));
                    chains.len() - 1
                }
            };
            let new = new_inputs(chains, g);
            chains[g].operands += 1 + new.len();
            chains[g].inputs.extend(new);
            chains[g].members.push(i);
            chain_of[i] = Some(g);
        }
        for g in 0..chains.len() {
            close(g, chains, &mut order);
        }
        Ok(order)
    }

    /// The values a stage reads from outside it.
    #[inline(never)]
    fn stage_reads(&self, stage: &Stage) -> Vec<usize> {
        let mut reads = Vec::new();
        match stage {
            Stage::Node(i) => {
                for v in self.nodes[*i].op.operands().into_iter().flatten() {
                    reads.push(v.index);
                }
            }
            Stage::Rows(r) => {
                for input in &r.inputs {
                    reads.push(input.value);
                }
            }
        }
        reads
    }

    /// The row shape that node `i` starts a row chain of (a reduction over the last dim, or an
    /// elementwise node of rank 1 or more), and its operands with the dims that place them:
    /// `None` for a node no row chain takes.
    #[inline(never)]
    fn row_node(&self, i: usize) -> Option<(Vec<usize>, Placements)> {
        let node = &self.nodes[i];
        match &node.op {
            Op::Reduce { op, x, axes } => {
                let shape = &self.nodes[x.index].shape;
                let rows = folds_rows(axes, shape.len());
                let folds = self.nodes[x.index].ty.fold_kernel(*op).is_some();
                let dims = iota(shape.len()).to_vec();
                (rows && folds).then(|| (shape.clone(), vec![(*x, dims)]))
            }
            op if fusible(op) && !node.shape.is_empty() => {
                Some((node.shape.clone(), self.placements(i).ok()?))
            }
            _ => None,
        }
    }

    /// Whether node `i`, reading `reads`, joins row chain `b` (number `g`; `chain_of` gives
    /// each node's chain so far): a reduction of a full value over the last dim, an elementwise
    /// node at the full shape (reading members at it, or per-row members along its rows), or
    /// one per row (reading per-row members, or none: a scalar broadcast to the kept dims);
    /// every other value it reads comes before the chain's first member.
    #[inline(never)]
    fn joins(
        &self,
        i: usize,
        reads: &Placements,
        b: &Building,
        g: usize,
        chain_of: &[Option<usize>],
    ) -> bool {
        let node = &self.nodes[i];
        let rank = b.shape.len();
        let full = node.shape == b.shape;
        // Per-row values (over the kept dims) come with the chain's folds, or this node's.
        let folds = b.folds > 0 || matches!(node.op, Op::Reduce { .. });
        let kept = folds.then_some(0..rank.saturating_sub(1));
        let per_row = kept.clone().is_some_and(|k| node.shape[..] == b.shape[k]);
        let member = |v: &Value| chain_of[v.index] == Some(g);
        let before = |v: &Value| {
            v.index < b.first || matches!(self.nodes[v.index].op, Op::Parameter | Op::Constant(_))
        };
        let dims_ok = |v: &Value, dims: &[usize]| {
            let v_full = self.nodes[v.index].shape == b.shape;
            match (full, v_full) {
                (true, true) => dims == iota(rank).as_slice(),
                // A per-row value along a full node's rows, or as it is at a per-row node.
                (true, false) => kept.clone().is_some_and(|k| dims.iter().copied().eq(k)),
                (false, false) => kept
                    .clone()
                    .is_some_and(|k| dims == iota(k.len()).as_slice()),
                (false, true) => false,
            }
        };
        let placed_ok = reads.iter().all(|(v, dims)| match member(v) {
            true => dims_ok(v, dims),
            false => before(v),
        });
        match &node.op {
            Op::Reduce { .. } => {
                let (x, _) = &reads[0];
                per_row && self.nodes[x.index].shape == b.shape && (member(x) || before(x))
            }
            _ => (full || per_row) && placed_ok,
        }
    }

    /// The program's row chains: reductions over the last dim with the elementwise nodes
    /// around them, each run a tile of rows at a time. A node joins the latest chain that
    /// holds one of its operands and takes it, else the latest that takes it, else starts one;
    /// chains without a reduction are left to the groups.
    #[inline(never)]
    fn row_chains(&self) -> Vec<Building> {
        let mut chain_of: Vec<Option<usize>> = vec![None; self.nodes.len()];
        let mut chains: Vec<Building> = Vec::new();
        for i in 0..self.nodes.len() {
            let Some((shape, reads)) = self.row_node(i) else {
                continue;
            };
            let mut order: Vec<usize> = reads
                .iter()
                .filter_map(|(v, _)| chain_of[v.index])
                .collect();
            // Latest chain first (the one sort of indices the crate compiles).
            order.sort_unstable();
            order.reverse();
            order.extend((0..chains.len()).rev());
            let found = order
                .into_iter()
                .find(|&g| self.joins(i, &reads, &chains[g], g, &chain_of));
            let g = match found {
                Some(g) => g,
                None => {
                    chains.push(Building::new(&shape, i, false));
                    let g = chains.len() - 1;
                    if !self.joins(i, &reads, &chains[g], g, &chain_of) {
                        chains.pop();
                        continue;
                    }
                    g
                }
            };
            chains[g].members.push(i);
            if let Op::Reduce { .. } = &self.nodes[i].op {
                chains[g].folds += 1;
            }
            chain_of[i] = Some(g);
        }
        chains.retain(|c| c.folds > 0);
        chains
    }

    /// The chain of `members` (node indices, in order) over `shape`, writing the members
    /// `needed` says to arrays: a group (elementwise members at `shape`) or a row chain (with
    /// folds, and members per row at the dims they keep). A member's operand that is a member is
    /// a register; every other is an input, placed at `shape`, or at the kept dims when a
    /// per-row member reads it.
    #[inline(never)]
    fn chain(&self, members: &[usize], shape: &[usize], needed: &[bool]) -> Result<Rows> {
        let is_member = |v: usize| members.contains(&v);
        let full = |v: usize| self.nodes[v].shape == shape;
        // Each member's operands as placed at its shape; a reduction reads a full value.
        let mut reads = Vec::with_capacity(members.len());
        for &i in members {
            reads.push(match &self.nodes[i].op {
                Op::Reduce { x, .. } => vec![(*x, iota(shape.len()).to_vec())],
                _ => self.placements(i)?,
            });
        }
        // A broadcast of a value from outside the chain that only the chain reads is no step:
        // its readers read that value placed through it, as the broadcast itself does. (Only
        // where every reader reads it as it is, so that the broadcast's dims place it for all.)
        let mut read_as_is = vec![true; self.nodes.len()];
        for (v, dims) in reads.iter().flatten() {
            read_as_is[v.index] &= dims == iota(dims.len()).as_slice();
        }
        let folded = |i: usize| match &self.nodes[i].op {
            Op::BroadcastInDim { x, dims }
                if !needed[i] && !is_member(x.index) && read_as_is[i] =>
            {
                Some((x.index, dims))
            }
            _ => None,
        };
        let mut inputs: Vec<RowInput> = Vec::new();
        // Each operand of each member: `None` for a member, else its input's number.
        let mut sources: Vec<Vec<Option<usize>>> = Vec::with_capacity(members.len());
        for (&i, read) in members.iter().zip(&reads) {
            let mut source = Vec::with_capacity(read.len());
            let per_row = !full(i) && !matches!(self.nodes[i].op, Op::Reduce { .. });
            for (v, dims) in read.iter().filter(|_| folded(i).is_none()) {
                let (value, dims) = match folded(v.index) {
                    Some((x, bdims)) => (x, bdims.clone()),
                    None if is_member(v.index) => {
                        source.push(None);
                        continue;
                    }
                    None => (v.index, dims.clone()),
                };
                let input = RowInput {
                    value,
                    dims,
                    per_row,
                };
                source.push(Some(match inputs.iter().position(|w| *w == input) {
                    Some(k) => k,
                    None => {
                        inputs.push(input);
                        inputs.len() - 1
                    }
                }));
            }
            sources.push(source);
        }
        let (outputs, temps) = split_needed(members, needed);
        let base = inputs.len();
        let register_of = |m: usize| match outputs.iter().position(|&o| o == m) {
            Some(k) => base + k,
            None => base + outputs.len() + temps.iter().position(|&t| t == m).expect("a member"),
        };
        let (mut per_row, mut sizes) = (Vec::new(), Vec::new());
        for input in &inputs {
            per_row.push(input.per_row);
            sizes.push(self.nodes[input.value].ty.size());
        }
        for &m in outputs.iter().chain(&temps) {
            per_row.push(!full(m));
            sizes.push(self.nodes[m].ty.size());
        }
        let (mut steps, mut identities) = (Vec::with_capacity(members.len()), Vec::new());
        for ((&i, read), source) in members.iter().zip(&reads).zip(&sources) {
            if folded(i).is_some() {
                continue;
            }
            let mut reg = Vec::with_capacity(read.len());
            for ((v, _), k) in read.iter().zip(source) {
                reg.push(k.unwrap_or_else(|| register_of(v.index)));
            }
            steps.push(match &self.nodes[i].op {
                Op::Reduce { op, x, .. } => {
                    let ty = self.nodes[x.index].ty;
                    let name = self.nodes[i].op.name();
                    identities.push(Tensor::identity(ty, *op).ok_or_else(|| mismatch(name))?);
                    RowStep::Fold {
                        run: ty.fold_kernel(*op).ok_or_else(|| mismatch(name))?,
                        identity: identities.len() - 1,
                        out: register_of(i),
                        src: reg[0],
                    }
                }
                _ => {
                    let (kernel, args) = self.kernel_of(i, &reg)?;
                    RowStep::Map {
                        kernel,
                        out: register_of(i),
                        args,
                    }
                }
            });
        }
        // `Program::order_stages` bounds a group's operands; a row chain runs on any number.
        debug_assert!(!identities.is_empty() || base + outputs.len() <= MAX_OPERANDS);
        Ok(Rows {
            shape: shape.to_vec(),
            members: members.to_vec(),
            reads,
            inputs,
            direct: vec![None; outputs.len()],
            last_use: vec![true; outputs.len()],
            outputs,
            per_row,
            sizes,
            steps,
            identities,
        })
    }
    /// Each operand of elementwise node `i`, with the dims that place it at the node's shape.
    fn placements(&self, i: usize) -> Result<Placements> {
        Ok(placements(&self.nodes[i], &|v| {
            self.nodes[v.index].shape.len()
        }))
    }

    /// The table kernel of elementwise node `i` and its arguments, its operands (in
    /// [`Program::placements`]' order) being registers `reg`.
    fn kernel_of(&self, i: usize, reg: &[usize]) -> Result<(Kernel, [usize; 3])> {
        let (kernel, args) = kernel(&self.nodes[i], &|v| self.nodes[v.index].ty)?;
        Ok((kernel, args.map(|a| reg.get(a).copied().unwrap_or(0))))
    }
}

impl Executable {
    /// Runs the program on `inputs` (one per parameter, in order), as [`Program::run`] does and
    /// with its results, bit for bit.
    ///
    /// ```
    /// use ndarray::arr1;
    /// use xla_bcast::stablehlo::{Program, Tensor};
    ///
    /// let mut p = Program::new("neg");
    /// let x = p.parameter::<i32>(&[2]);
    /// let y = p.neg(x).unwrap();
    /// p.output(y).unwrap();
    /// let exe = p.compile().unwrap();
    /// let out = exe.run(&[arr1(&[1, -2]).into_dyn().into()]).unwrap();
    /// assert_eq!(out, [Tensor::from(arr1(&[-1, 2]).into_dyn())]);
    /// assert!(exe.run(&[]).is_err()); // one input per parameter
    /// ```
    ///
    /// # Errors
    /// As [`Program::run`]: the wrong count, type or shape of inputs, or a result too large to
    /// allocate.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let views: Vec<TensorView<'_>> = inputs.iter().map(Tensor::read).collect();
        self.run_views(&views)
    }

    /// [`Executable::run`] on the caller's arrays or views where they lie: nothing the size
    /// of an input is copied.
    ///
    /// ```
    /// use ndarray::{array, Array2};
    /// use xla_bcast::stablehlo::{Program, Tensor, TensorView};
    ///
    /// let mut p = Program::new("bias");
    /// let x = p.parameter::<f64>(&[2, 3]);
    /// let b = p.parameter::<f64>(&[3]);
    /// let y = p.add(x, b, &[1]).unwrap();
    /// p.output(y).unwrap();
    /// let exe = p.compile().unwrap();
    /// let x: Array2<f64> = Array2::ones((2, 3));
    /// let b = array![1.0, 2.0, 3.0];
    /// let out = exe.run_views(&[TensorView::from(&x), b.view().into()]).unwrap();
    /// assert_eq!(out[0], Tensor::from(array![[2.0, 3.0, 4.0], [2.0, 3.0, 4.0]].into_dyn()));
    /// ```
    ///
    /// # Errors
    /// As [`Executable::run`].
    pub fn run_views(&self, inputs: &[TensorView<'_>]) -> Result<Vec<Tensor>> {
        let mut values = self.execute(inputs, &mut [])?;
        let outputs = &self.program.outputs;
        let mut results = Vec::with_capacity(outputs.len());
        for (k, v) in outputs.iter().enumerate() {
            let value = match outputs[k + 1..].contains(v) {
                true => values[v.index].clone(),
                false => values[v.index].take(),
            };
            results.push(value.expect("every output was computed").into_owned());
        }
        Ok(results)
    }

    /// Runs the program on `inputs`, writing its results into `outputs`: one per output, of its
    /// type and shape, in any layout: the caller's own arrays or views
    /// ([`TensorViewMut::from`]`(&mut y)`), or [`Tensor`]s' ([`Tensor::view_mut`]). An output a chain computes is
    /// written there in place, the others are copied in. Nothing the size of an output is
    /// allocated for it, and the large intermediates that reductions need are kept from one
    /// run for the next, so a loop that calls this allocates no large array after its first
    /// call.
    ///
    /// ```
    /// use ndarray::{arr1, Array1};
    /// use xla_bcast::stablehlo::{Program, Tensor, TensorViewMut};
    ///
    /// let mut p = Program::new("scale");
    /// let x = p.parameter::<f64>(&[3]);
    /// let two = p.constant(2.0f64);
    /// let y = p.mul(x, two, &[]).unwrap();
    /// p.output(y).unwrap();
    /// let exe = p.compile().unwrap();
    /// let mut out = Array1::<f64>::zeros(3); // the caller's array
    /// exe.run_into(&[arr1(&[1.0, 2.0, 3.0]).into()], &mut [TensorViewMut::from(&mut out)]).unwrap();
    /// assert_eq!(out, arr1(&[2.0, 4.0, 6.0]));
    /// let mut t = Tensor::from(Array1::<f64>::zeros(3)); // or a tensor's
    /// exe.run_into(&[arr1(&[1.0, 2.0, 3.0]).into()], &mut [t.view_mut()]).unwrap();
    /// assert_eq!(t, Tensor::from(arr1(&[2.0, 4.0, 6.0])));
    /// ```
    ///
    /// # Errors
    /// As [`Executable::run`]; and [`BroadcastError::ArgumentCount`],
    /// [`BroadcastError::ElementType`] or [`BroadcastError::ArgumentShape`] for outputs of the
    /// wrong count, type or shape (naming the output by its index).
    pub fn run_into(&self, inputs: &[Tensor], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let views: Vec<TensorView<'_>> = inputs.iter().map(Tensor::read).collect();
        self.run_views_into(&views, outputs)
    }

    /// [`Executable::run_into`] on the caller's arrays or views where they lie: a loop that
    /// calls it copies no input and allocates no large array after its first call.
    ///
    /// ```
    /// use ndarray::{array, Array2};
    /// use xla_bcast::stablehlo::{Program, TensorView, TensorViewMut};
    ///
    /// let mut p = Program::new("double");
    /// let x = p.parameter::<f32>(&[2, 3]);
    /// let y = p.add(x, x, &[]).unwrap();
    /// p.output(y).unwrap();
    /// let exe = p.compile().unwrap();
    /// let x = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    /// let mut out = Array2::<f32>::zeros((3, 2));
    /// let view = TensorViewMut::from(out.view_mut().reversed_axes()); // a view of the caller's
    /// exe.run_views_into(&[TensorView::from(&x)], &mut [view]).unwrap();
    /// assert_eq!(out.t(), &x * 2.0);
    /// ```
    ///
    /// # Errors
    /// As [`Executable::run_into`].
    pub fn run_views_into(
        &self,
        inputs: &[TensorView<'_>],
        outputs: &mut [TensorViewMut<'_>],
    ) -> Result<()> {
        let program = &self.program;
        if outputs.len() != program.outputs.len() {
            return Err(BroadcastError::ArgumentCount {
                op: "run_into",
                program: program.name.clone(),
                kind: "outputs",
                expected: program.outputs.len(),
                got: outputs.len(),
            });
        }
        for (k, (out, v)) in outputs.iter().zip(&program.outputs).enumerate() {
            let node = program.node(*v);
            program.check_argument(
                "run_into",
                "output",
                k,
                node,
                out.element_type(),
                out.shape(),
            )?;
        }
        let mut direct: Vec<Option<TensorViewMut<'_>>> =
            outputs.iter_mut().map(|o| Some(o.view_mut())).collect();
        let values = self.execute(inputs, &mut direct)?;
        // The outputs lent to later stages (taken from `direct`) were written in place.
        for (out, v) in direct.iter_mut().zip(&program.outputs) {
            if let (Some(out), Some(value)) = (out, &values[v.index]) {
                out.assign_from("run_into", value)?;
            }
        }
        Ok(())
    }

    /// Runs every stage; the outputs in `direct` (checked: one per program output, or none)
    /// that a chain computes are written in place and left out of the values returned, but
    /// for those a later stage reads: their views are taken from `direct` and lent to the
    /// values, read-only.
    fn execute<'t, 'i: 't>(
        &'t self,
        inputs: &[TensorView<'i>],
        direct: &mut [Option<TensorViewMut<'t>>],
    ) -> Result<Vec<Option<Held<'t>>>> {
        let program = &self.program;
        let mut values = program.inputs("run", inputs)?;
        for (i, node) in program.nodes.iter().enumerate() {
            if let Op::Constant(t) = &node.op {
                values[i] = Some(Held::Read(t.read()));
            }
        }
        self.stages(&mut values, direct)?;
        Ok(values)
    }

    /// Runs the stages in order, as [`Executable::execute`] says.
    #[inline(never)]
    fn stages<'t>(
        &'t self,
        values: &mut [Option<Held<'t>>],
        direct: &mut [Option<TensorViewMut<'t>>],
    ) -> Result<()> {
        let program = &self.program;
        for (s, stage) in self.stages.iter().enumerate() {
            #[cfg(test)]
            if tests::PANIC_AT.get() == Some(s) {
                panic!("stage {s} panics (a test's)");
            }
            match stage {
                Stage::Node(i) => {
                    let get =
                        |v: &Value| values[v.index].as_ref().expect("values are made in order");
                    let out = eval(&program.nodes[*i], &get)?;
                    values[*i] = Some(Held::Owned(out));
                }
                Stage::Rows(r) => self.run_rows(r, values, direct)?,
            }
            for &v in &self.drops[s] {
                if let Some(Held::Owned(t)) = values[v].take() {
                    self.scratch.give(t);
                }
            }
        }
        Ok(())
    }

    /// Each member's layout in `Program::run` (from its operands' layouts), `strides` giving
    /// those of the values before the chain.
    fn run_layouts<'v>(&self, r: &Rows, strides: &dyn Fn(usize) -> &'v [isize]) -> Vec<Strides> {
        let program = &self.program;
        let mut layout: Vec<Strides> = Vec::with_capacity(r.members.len());
        for (k, &i) in r.members.iter().enumerate() {
            let node = &program.nodes[i];
            let mut placed: Vec<Strides> = Vec::new();
            match node.op {
                Op::Reduce { .. } => placed.push(smallvec::smallvec![0; node.shape.len()]),
                _ => {
                    for (v, dims) in &r.reads[k] {
                        let own = match r.members.iter().position(|&m| m == v.index) {
                            Some(j) => layout[j].clone(),
                            None => Strides::from_slice(strides(v.index)),
                        };
                        let shape = &program.nodes[v.index].shape;
                        placed.push(crate::view::place_strides(shape, &own, &node.shape, dims));
                    }
                }
            }
            let mut placed_refs: Vec<&[isize]> = Vec::with_capacity(placed.len());
            for s in &placed {
                placed_refs.push(s);
            }
            layout.push(crate::engine::strides_like(&node.shape, &placed_refs));
        }
        layout
    }

    /// Runs row chain `r`: a tile of rows at a time when each of its reductions reads rows that
    /// `Program::run` would find contiguous in memory (so that they fold in its order), else
    /// node by node as `Program::run` does. Its outputs in `direct` are written there.
    #[inline(never)]
    fn run_rows<'t>(
        &'t self,
        r: &Rows,
        values: &mut [Option<Held<'t>>],
        direct: &mut [Option<TensorViewMut<'t>>],
    ) -> Result<()> {
        let program = &self.program;
        // A chain without folds may be rank 0; one with them is not.
        let rank = r.shape.len();
        let n = r.shape.last().copied().unwrap_or(1);
        let value = |v: usize| values[v].as_ref().expect("values are made in order");
        let layout = self.run_layouts(r, &|v| value(v).strides());
        let laid = |v: usize| match r.members.iter().position(|&m| m == v) {
            Some(j) => &layout[j][..],
            None => value(v).strides(),
        };
        // Where `Program::run` folds a source over its last dim along contiguous rows, the
        // chain folds in its order.
        let in_order = |v: usize| n == 1 || laid(v)[rank - 1] == 1;
        let by_rows = r.shape.iter().all(|&d| d > 0)
            && r.members.iter().zip(&r.reads).all(|(&i, read)| {
                !matches!(program.nodes[i].op, Op::Reduce { .. }) || in_order(read[0].0.index)
            });
        // The inputs, each at the chain's shape or, per row, at the kept dims.
        let per_row_at = &r.shape[..rank.saturating_sub(1)];
        let place_inputs = || -> Result<Vec<Operand<'_>>> {
            let mut placed = Vec::with_capacity(r.sizes.len());
            for input in &r.inputs {
                let at = if input.per_row {
                    per_row_at
                } else {
                    &r.shape[..]
                };
                placed.push(value(input.value).placed("run", at, &input.dims)?);
            }
            Ok(placed)
        };
        // The caller's arrays the outputs are written to: those nothing after reads, and those
        // laid out as `Program::run` lays them out (lent to the later stages).
        let member_layout =
            |m: usize| &layout[r.members.iter().position(|&x| x == m).expect("a member")];
        let mut target: Vec<Option<usize>> = vec![None; r.outputs.len()];
        for (k, to) in target.iter_mut().enumerate() {
            if let Some(d) = r.direct[k].filter(|_| !direct.is_empty()) {
                let same = direct[d]
                    .as_ref()
                    .is_some_and(|t| t.strides() == &member_layout(r.outputs[k])[..]);
                *to = (r.last_use[k] || same).then_some(d);
            }
        }
        if !by_rows {
            for &i in &r.members {
                let get = |v: &Value| values[v.index].as_ref().expect("values are made in order");
                let out = eval(&program.nodes[i], &get)?;
                values[i] = Some(Held::Owned(out));
            }
            return Ok(());
        }
        let mut fresh: Vec<(usize, Member)> = Vec::new();
        for (k, &m) in r.outputs.iter().enumerate() {
            if target[k].is_none() {
                let own = &layout[r.members.iter().position(|&x| x == m).expect("a member")];
                let (ty, shape) = (program.nodes[m].ty, &program.nodes[m].shape);
                let member = match self.scratch.take(ty, shape, own) {
                    Some(t) => Member::Kept(t),
                    None => Member::Fresh(Unwritten::new(ty, "run", shape, &[own])?),
                };
                fresh.push((m, member));
            }
        }
        {
            let mut operands = place_inputs()?;
            operands.reserve(r.outputs.len());
            let mut fresh_iter = fresh.iter_mut();
            let mut slots: Vec<Option<&mut TensorViewMut<'t>>> = Vec::with_capacity(direct.len());
            for t in direct.iter_mut() {
                slots.push(t.as_mut());
            }
            for &to in &target {
                operands.push(match to {
                    Some(d) => slots[d].take().expect("one member per output").output(),
                    None => match &mut fresh_iter.next().expect("allocated").1 {
                        Member::Fresh(t) => t.operand(),
                        Member::Kept(t) => t.output(),
                    },
                });
            }
            Self::run_chain(r, operands)?;
        }
        for (m, t) in fresh {
            let t = match t {
                // SAFETY: the row chain wrote every element of each output.
                Member::Fresh(t) => unsafe { t.assume_init() },
                Member::Kept(t) => t,
            };
            values[m] = Some(Held::Owned(t));
        }
        for (k, &m) in r.outputs.iter().enumerate() {
            if let (Some(d), false) = (target[k], r.last_use[k]) {
                values[m] = direct[d].take().map(|t| Held::Read(t.into_read()));
            }
        }
        Ok(())
    }

    /// Row chain `r` over its placed `operands` (its inputs, then its outputs' arrays) on the
    /// row executor.
    fn run_chain(r: &Rows, operands: Vec<Operand<'_>>) -> Result<()> {
        let mut written = vec![false; r.inputs.len()];
        written.resize(operands.len(), true);
        let mut identities = Vec::with_capacity(r.identities.len());
        for t in &r.identities {
            identities.push(crate::engine::Shared(t.first_element().cast_mut()));
        }
        let chain = rows::RowChain {
            operands: &operands,
            written: &written,
            per_row: &r.per_row,
            sizes: &r.sizes,
            steps: &r.steps,
            identities: &identities,
        };
        // SAFETY: the kernels and folds were chosen for their registers' types
        // (`Program::chain`), each fold's identity a rank-0 tensor of its
        // type; each step reads inputs or earlier steps' registers and each member is written
        // by its one step; the outputs are fresh arrays or the caller's (borrowed mutably,
        // distinct from the inputs) of their members' shapes; the inputs are placed at the
        // chain's shape or, per row, at its outer shape; a chain with folds has no dim of size
        // 0, one without at most `MAX_OPERANDS` operands (`Program::compile` bounds its groups).
        unsafe { rows::run(&r.shape, &chain) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::ArrayD;

    thread_local! {
        /// The stage at which `Executable::stages` panics, for the tests of what a panic leaves.
        pub(super) static PANIC_AT: std::cell::Cell<Option<usize>> =
            const { std::cell::Cell::new(None) };
    }

    /// A stage that panics after an output was written into the caller's array and lent to a
    /// later stage leaves the caller that array, not the stand-in that held its place.
    #[test]
    fn a_panic_gives_the_lent_outputs_back() {
        let mut p = Program::new("lent");
        let x = p.parameter::<f32>(&[64, 64]);
        let y = p.add(x, x, &[]).unwrap();
        let s = p.reduce_sum(y, &[0, 1]).unwrap();
        p.output(y).unwrap();
        p.output(s).unwrap();
        let exe = p.compile().unwrap();
        let inputs = [Tensor::from(ArrayD::<f32>::ones(ndarray::IxDyn(&[64, 64])))];
        let mut outputs = p.run(&inputs).unwrap();
        let stages = exe.stages.len();
        assert!(stages >= 2, "a chain, then the reduction");
        PANIC_AT.set(Some(stages - 1));
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            exe.run_into(
                &inputs,
                &mut outputs.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
            )
        }));
        PANIC_AT.set(None);
        assert!(caught.is_err());
        assert_eq!(outputs[0].shape(), &[64, 64], "the caller's array is back");
    }

    /// A softmax over the last dim of `shape`, and the row max as a second output.
    fn softmax(shape: &[usize]) -> Program {
        softmax_over(shape, &[shape.len() - 1])
    }

    /// A softmax over dims `folded` of `shape`, and the maximum as a second output.
    fn softmax_over(shape: &[usize], folded: &[usize]) -> Program {
        let kept: Vec<usize> = (0..shape.len()).filter(|d| !folded.contains(d)).collect();
        let mut p = Program::new("softmax");
        let x = p.parameter::<f32>(shape);
        let mx = p.reduce_max(x, folded).unwrap();
        let d = p.sub(x, mx, &kept).unwrap();
        let e = p.exp(d).unwrap();
        let s = p.reduce_sum(e, folded).unwrap();
        let y = p.div(e, s, &kept).unwrap();
        p.output(y).unwrap();
        p.output(mx).unwrap();
        p
    }

    /// `exe`'s results, allocating and into the results' shapes: `p`'s bits, as
    /// `Program::run` gives them.
    fn check_both(p: &Program, exe: &Executable, inputs: &[Tensor], name: &str) {
        let want = p.run(inputs).unwrap();
        let got = exe.run(inputs).unwrap();
        let mut into = want.clone();
        for t in &mut into {
            if let Tensor::F32(a) = t {
                a.fill(0.0);
            }
        }
        exe.run_into(
            inputs,
            &mut into.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
        )
        .unwrap();
        assert_eq!(got, want, "{name}");
        assert_eq!(into, want, "{name} into");
    }

    /// GELU in its `tanh` form over `shape` (nine ops reading `x` four times, four constants),
    /// and its output.
    fn gelu(shape: &[usize]) -> (Program, Value) {
        let mut p = Program::new("gelu");
        let x = p.parameter::<f32>(shape);
        let c = p.constant(0.044715f32);
        let k = p.constant(0.7978846f32);
        let (half, one) = (p.constant(0.5f32), p.constant(1.0f32));
        let x2 = p.mul(x, x, &[]).unwrap();
        let x3 = p.mul(x2, x, &[]).unwrap();
        let cx3 = p.mul(c, x3, &[]).unwrap();
        let inner = p.add(x, cx3, &[]).unwrap();
        let kin = p.mul(k, inner, &[]).unwrap();
        let t = p.tanh(kin).unwrap();
        let onet = p.add(one, t, &[]).unwrap();
        let hx = p.mul(half, x, &[]).unwrap();
        let y = p.mul(hx, onet, &[]).unwrap();
        p.output(y).unwrap();
        (p, y)
    }

    /// A group counts each value it reads from outside once per placement against its bound
    /// on operands: GELU's nine ops, which read their input four times, are one loop; a chain
    /// of 13 inputs (a vector read in two placements is two) and 12 outputs is cut into loops
    /// of at most [`MAX_OPERANDS`] operands (a loop of more stops the executor), and gives
    /// `Program::run`'s results.
    #[test]
    fn groups_count_each_input_once() {
        let (p, _) = gelu(&[4, 5]);
        let exe = p.compile().unwrap();
        assert_eq!(exe.stages.len(), 1);
        let values: Vec<f32> = (0..20).map(|i| i as f32 * 0.3 - 3.0).collect();
        let inputs = [Tensor::from(
            ArrayD::from_shape_vec(vec![4, 5], values).unwrap(),
        )];
        assert_eq!(exe.run(&inputs).unwrap(), p.run(&inputs).unwrap());

        // Six vectors, each added to `x` along the rows and along the columns, every sum an
        // output: each vector is two inputs (one per placement) beside two outputs.
        let mut p = Program::new("placed");
        let x = p.parameter::<f32>(&[6, 6]);
        let mut inputs = vec![Tensor::from(ArrayD::from_shape_fn(vec![6, 6], |i| {
            (i[0] * 6 + i[1]) as f32 * 0.125 - 2.0
        }))];
        for j in 0..6 {
            let b = p.parameter::<f32>(&[6]);
            inputs.push(Tensor::from(ArrayD::from_shape_fn(vec![6], |i| {
                (i[0] + j) as f32 * 0.0625 + 0.5
            })));
            let rows = p.add(x, b, &[0]).unwrap();
            let columns = p.add(x, b, &[1]).unwrap();
            p.output(rows).unwrap();
            p.output(columns).unwrap();
        }
        let exe = p.compile().unwrap();
        assert!(exe.stages.len() >= 2, "{} loops", exe.stages.len());
        assert_eq!(exe.run(&inputs).unwrap(), p.run(&inputs).unwrap());
    }

    /// Chains without folds: GELU in chunks of long rows (its output written in place, also
    /// where a later sum over the rows reads it) and in tiles of whole rows; `relu(x + b)` with
    /// `b` a row, in chunks of each row; `Program::run`'s results, allocating and into the
    /// caller's arrays.
    #[test]
    fn chains_without_folds_match_run() {
        let value = |i: usize| ((i * 37) % 101) as f32 * 0.07 - 3.5;
        let array = |shape: &[usize], from: usize| {
            let n: usize = shape.iter().product();
            let values = (from..from + n).map(value).collect();
            Tensor::from(ArrayD::from_shape_vec(shape, values).unwrap())
        };
        let mut cases = Vec::new();
        for (shape, sum) in [
            (&[3usize, 2500][..], false),
            (&[7, 300], false),
            (&[40, 300], true),
        ] {
            let (mut p, y) = gelu(shape);
            if sum {
                let s = p.reduce_sum(y, &[0]).unwrap();
                p.output(s).unwrap();
            }
            cases.push((p, vec![array(shape, 0)]));
        }
        let (m, n) = (3, 2500);
        let mut p = Program::new("bias_relu");
        let x = p.parameter::<f32>(&[m, n]);
        let b = p.parameter::<f32>(&[n]);
        let s = p.add(x, b, &[1]).unwrap();
        let zero = p.constant(0.0f32);
        let y = p.max(s, zero, &[]).unwrap();
        p.output(y).unwrap();
        cases.push((p, vec![array(&[m, n], 0), array(&[n], 5)]));
        for (p, inputs) in cases {
            let want = p.run(&inputs).unwrap();
            let exe = p.compile().unwrap();
            let mut into = want.clone();
            exe.run_into(
                &inputs,
                &mut into.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
            )
            .unwrap();
            let got = exe.run(&inputs).unwrap();
            let shape = inputs[0].shape().to_vec();
            assert_eq!(got, want, "{} {shape:?}", p.name());
            assert_eq!(into, want, "{} {shape:?} into", p.name());
        }
    }

    /// A row chain gives `Program::run`'s results, allocating and into the caller's arrays: in
    /// tiles of rows, and a row at a time over rows of 600 and 1,030 (of rank 3: the row's
    /// place carried over two outer dims).
    #[test]
    fn row_chains_match_run() {
        for shape in [
            &[6usize, 40][..],
            &[5, 3, 33],
            &[9, 1],
            &[3, 600],
            &[2, 3, 1030],
        ] {
            let p = softmax(shape);
            let n: usize = shape.iter().product();
            let values: Vec<f32> = (0..n)
                .map(|i| ((i * 37) % 23) as f32 * 0.25 - 2.0)
                .collect();
            let x = Tensor::from(ArrayD::from_shape_vec(shape, values).unwrap());
            let exe = p.compile().unwrap();
            assert!(exe.stages.iter().any(|s| matches!(s, Stage::Rows(_))));
            check_both(&p, &exe, &[x], &format!("{shape:?}"));
        }
    }

    /// Broadcasts inside a row chain that only the chain reads are no steps (a row vector, a
    /// transposed input, a scalar): their readers read the broadcasts' inputs through their
    /// placements, with `Program::run`'s bits.
    #[test]
    fn row_chains_read_broadcasts_in_place() {
        let (m, n) = (37, 530);
        let mut p = Program::new("broadcasts");
        let x = p.parameter::<f32>(&[m, n]);
        let b = p.parameter::<f32>(&[n]);
        let t = p.parameter::<f32>(&[n, m]);
        let k = p.constant(0.5f32);
        let bb = p.broadcast_in_dim(b, &[m, n], &[1]).unwrap();
        let tt = p.broadcast_in_dim(t, &[m, n], &[1, 0]).unwrap();
        let kk = p.broadcast_in_dim(k, &[m, n], &[]).unwrap();
        let y = p.mul(x, bb, &[]).unwrap();
        let y = p.add(y, tt, &[]).unwrap();
        let y = p.sub(y, kk, &[]).unwrap();
        let s = p.reduce_sum(y, &[1]).unwrap();
        // A per-row value that reads no member (a scalar broadcast to the kept dims) joins too.
        let kr = p.broadcast_in_dim(k, &[m], &[]).unwrap();
        let s = p.add(s, kr, &[]).unwrap();
        let z = p.div(y, s, &[0]).unwrap();
        p.output(z).unwrap();
        let exe = p.compile().unwrap();
        let rows: Vec<&Rows> = (exe.stages.iter())
            .filter_map(|s| match s {
                Stage::Rows(r) => Some(&**r),
                Stage::Node(_) => None,
            })
            .collect();
        assert_eq!(exe.stages.len(), 1, "{:?}", exe.stages);
        assert_eq!(rows[0].steps.len(), rows[0].members.len() - 4);
        let fill = |len: usize, k: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i * k) % 19) as f32 * 0.5 - 3.0)
                .collect()
        };
        let inputs = [
            Tensor::from(ArrayD::from_shape_vec(&[m, n][..], fill(m * n, 7)).unwrap()),
            Tensor::from(ArrayD::from_shape_vec(&[n][..], fill(n, 3)).unwrap()),
            Tensor::from(ArrayD::from_shape_vec(&[n, m][..], fill(m * n, 11)).unwrap()),
        ];
        check_both(&p, &exe, &inputs, "broadcasts");
    }
}
