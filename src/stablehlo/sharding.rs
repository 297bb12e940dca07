//! Shardings: how XLA's SPMD partitioner splits a program's arrays over a device mesh, in the
//! vocabulary of JAX's `Mesh` and `PartitionSpec`.
//!
//! A program with a [`Mesh`] and [`PartitionSpec`]s on some of its values exports them in
//! Shardy's dialect, the one XLA partitions with by default and keeps: an `sdy.mesh` for the
//! mesh, an `sdy.sharding` on each sharded parameter and output, and an
//! `sdy.sharding_constraint` where the program pins an intermediate; with the module's
//! partition count (`mhlo.num_partitions`). GSPMD's `mhlo.sharding` strings, which XLA is
//! removing, are one export option away ([`ShardingDialect::Gspmd`]). XLA then splits the work
//! and inserts the collectives (an all-reduce for a sum over a split dim). [`Program::run`] and
//! [`Program::compile`] ignore shardings: one machine computes the same values.
//!
//! Running the exported text on a mesh from JAX (`jax==0.10.2`; `tools/xla_spmd_check.py`
//! does this for every program of its corpus, and gathers the outputs' shards):
//!
//! ```text
//! import os; os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
//! import jax, numpy as np
//! from jax._src import compiler
//! from jax.extend.backend import get_backend
//! from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
//!
//! backend = get_backend("cpu")
//! options = compiler.get_compile_options(num_replicas=1, num_partitions=8,
//!                                        device_assignment=np.arange(8).reshape(1, 8))
//! options.executable_build_options.use_spmd_partitioning = True
//! options.executable_build_options.use_shardy_partitioner = True  # False for the GSPMD text
//! exe = backend.compile_and_load(text, backend.devices()[:8], options)
//! mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("data", "model"))
//! x = jax.device_put(x, NamedSharding(mesh, P("data", None)))
//! shards = exe.execute_sharded([x]).disassemble_into_single_device_arrays()
//! # shards[k][d]: output k's piece on device d (the mesh's row-major index d)
//! ```

use super::{Program, Value};
use crate::error::{BroadcastError, Result};

/// The dialect an export writes shardings in ([`Program::to_stablehlo_with`]).
///
/// ```
/// use xla_bcast::stablehlo::{Mesh, PartitionSpec, Program, ShardingDialect};
///
/// let mut p = Program::new("s");
/// p.set_mesh(Mesh::new(&[("data", 2)]).unwrap()).unwrap();
/// let x = p.parameter::<f32>(&[4]);
/// p.shard(x, &PartitionSpec::new(&[&["data"]])).unwrap();
/// p.output(x).unwrap();
/// assert!(p.to_stablehlo().contains(r#"sdy.sharding = #sdy.sharding<@mesh, [{"data"}]>"#));
/// let gspmd = p.to_stablehlo_with(ShardingDialect::Gspmd);
/// assert!(gspmd.contains(r#"mhlo.sharding = "{devices=[2]<=[2]}""#));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ShardingDialect {
    /// Shardy's (`sdy.mesh`, `sdy.sharding`, `sdy.sharding_constraint`): what XLA partitions
    /// with by default (`use_shardy_partitioner`), and keeps.
    #[default]
    Shardy,
    /// GSPMD's `mhlo.sharding` strings (and a `Sharding` custom call for a pinned
    /// intermediate), for an XLA that predates Shardy: XLA is removing this partitioner.
    Gspmd,
}

/// A device mesh: named axes with sizes, major first (JAX's `Mesh`); device `i` of the
/// partition count sits at the row-major index `i` of the mesh.
///
/// ```
/// use xla_bcast::stablehlo::Mesh;
/// let mesh = Mesh::new(&[("data", 4), ("model", 2)]).unwrap();
/// assert_eq!(mesh.devices(), 8);
/// assert!(Mesh::new(&[("data", 4), ("data", 2)]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mesh {
    axes: Vec<(String, usize)>,
}

impl Mesh {
    /// A mesh of these axes.
    ///
    /// ```
    /// use xla_bcast::stablehlo::Mesh;
    ///
    /// let mesh = Mesh::new(&[("data", 4), ("model", 2)]).unwrap();
    /// assert_eq!(mesh.devices(), 8);
    /// assert!(Mesh::new(&[("data", 2), ("data", 2)]).is_err()); // a name used twice
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::Sharding`] for no axes, an axis of size 0, an empty or repeated name.
    pub fn new(axes: &[(&str, usize)]) -> Result<Mesh> {
        let refuse = |axis: &str, reason: &str| BroadcastError::Sharding {
            array: "the mesh".to_string(),
            dim: None,
            axis: Some(axis.to_string()),
            reason: reason.to_string(),
        };
        if axes.is_empty() {
            return Err(refuse("", "a mesh has at least one axis"));
        }
        for (i, &(name, size)) in axes.iter().enumerate() {
            if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                return Err(refuse(name, "axis names are letters, digits and `_`"));
            }
            if size == 0 {
                return Err(refuse(name, "an axis has at least one device"));
            }
            if axes[..i].iter().any(|&(other, _)| other == name) {
                return Err(refuse(name, "the mesh names this axis twice"));
            }
        }
        axes.iter()
            .try_fold(1usize, |n, &(_, s)| n.checked_mul(s))
            .ok_or_else(|| refuse("", "the mesh's device count overflows"))?;
        Ok(Mesh {
            axes: axes.iter().map(|&(n, s)| (n.to_string(), s)).collect(),
        })
    }

    /// The number of devices: the product of the axes' sizes.
    ///
    /// ```
    /// use xla_bcast::stablehlo::Mesh;
    /// assert_eq!(Mesh::new(&[("x", 2), ("y", 3)]).unwrap().devices(), 6);
    /// ```
    pub fn devices(&self) -> usize {
        self.axes.iter().map(|(_, s)| s).product()
    }

    /// The axes, major first: names and sizes.
    ///
    /// ```
    /// use xla_bcast::stablehlo::Mesh;
    /// let mesh = Mesh::new(&[("data", 4), ("model", 2)]).unwrap();
    /// assert_eq!(mesh.axes().collect::<Vec<_>>(), [("data", 4), ("model", 2)]);
    /// ```
    pub fn axes(&self) -> impl Iterator<Item = (&str, usize)> {
        self.axes.iter().map(|(n, s)| (n.as_str(), *s))
    }

    fn position(&self, axis: &str) -> Option<usize> {
        self.axes.iter().position(|(n, _)| n == axis)
    }

    /// Shardy's declaration of the mesh, `@mesh` (device ids in the row-major order).
    pub(super) fn sdy(&self) -> String {
        let axes: Vec<String> = self
            .axes
            .iter()
            .map(|(n, s)| format!("\"{n}\"={s}"))
            .collect();
        format!("sdy.mesh @mesh = <[{}]>", axes.join(", "))
    }
}

/// How an array is split (JAX's `PartitionSpec`): for each of its dims, the mesh axes it is
/// split over, major first; no axes, a replicated dim. Mesh axes no dim uses replicate the
/// whole array along them.
///
/// ```
/// use xla_bcast::stablehlo::PartitionSpec;
/// // P("data", None) and P(("data", "model"), None)
/// let rows = PartitionSpec::new(&[&["data"], &[]]);
/// let both = PartitionSpec::new(&[&["data", "model"], &[]]);
/// assert_ne!(rows, both);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpec {
    dims: Vec<Vec<String>>,
}

impl PartitionSpec {
    /// For each dim, the mesh axes it is split over.
    ///
    /// ```
    /// use xla_bcast::stablehlo::PartitionSpec;
    ///
    /// // Dim 0 split over "data", dim 1 over "model" and "expert", dim 2 whole: P("data", ("model", "expert"), None).
    /// let spec = PartitionSpec::new(&[&["data"], &["model", "expert"], &[]]);
    /// assert_ne!(spec, PartitionSpec::new(&[&["data"]]));
    /// ```
    pub fn new(dims: &[&[&str]]) -> PartitionSpec {
        let dims = dims
            .iter()
            .map(|d| d.iter().map(|a| a.to_string()).collect());
        PartitionSpec {
            dims: dims.collect(),
        }
    }

    /// Every dim of an array of `rank` replicated.
    ///
    /// ```
    /// use xla_bcast::stablehlo::PartitionSpec;
    /// assert_eq!(PartitionSpec::replicated(2), PartitionSpec::new(&[&[], &[]]));
    /// ```
    pub fn replicated(rank: usize) -> PartitionSpec {
        PartitionSpec {
            dims: vec![Vec::new(); rank],
        }
    }

    /// The axes of each dim.
    ///
    /// ```
    /// use xla_bcast::stablehlo::PartitionSpec;
    /// let spec = PartitionSpec::new(&[&["data", "model"], &[]]);
    /// assert_eq!(spec.dims().collect::<Vec<_>>(), [vec!["data", "model"], vec![]]);
    /// ```
    pub fn dims(&self) -> impl Iterator<Item = Vec<&str>> {
        self.dims
            .iter()
            .map(|d| d.iter().map(String::as_str).collect())
    }

    /// Shardy's sharding of this spec on `@mesh` ([`Mesh::sdy`]): each dim's axes, major
    /// first, `{}` for a replicated dim (closed: the partitioner keeps it so).
    pub(super) fn sdy(&self) -> String {
        let mut dims = Vec::with_capacity(self.dims.len());
        for d in &self.dims {
            let axes: Vec<String> = d.iter().map(|a| format!("\"{a}\"")).collect();
            dims.push(format!("{{{}}}", axes.join(", ")));
        }
        format!("<@mesh, [{}]>", dims.join(", "))
    }

    /// GSPMD's sharding string for this spec on `mesh`: the tile assignment over the array's
    /// dims (and a last one, replicated, for the axes no dim uses) as an iota of the mesh's
    /// devices, transposed to the axes' order.
    pub(super) fn gspmd(&self, mesh: &Mesh) -> String {
        let mut order: Vec<usize> = Vec::new();
        let mut tiles: Vec<usize> = Vec::new();
        for d in &self.dims {
            let positions: Vec<usize> = d.iter().filter_map(|a| mesh.position(a)).collect();
            tiles.push(positions.iter().map(|&p| mesh.axes[p].1).product());
            order.extend(positions);
        }
        let unused: Vec<usize> = (0..mesh.axes.len())
            .filter(|p| !order.contains(p))
            .collect();
        let replicated: usize = unused.iter().map(|&p| mesh.axes[p].1).product();
        if tiles.iter().all(|&t| t == 1) {
            return "{replicated}".to_string();
        }
        order.extend(&unused);
        if replicated > 1 {
            tiles.push(replicated);
        }
        let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let sizes: Vec<usize> = mesh.axes.iter().map(|(_, s)| *s).collect();
        // In the mesh's order the devices are an iota; otherwise the mesh's dims transposed.
        let iota = match order.iter().copied().eq(0..order.len()) {
            true => format!("[{}]", mesh.devices()),
            false => format!("[{}]T({})", list(&sizes), list(&order)),
        };
        let last = match replicated > 1 {
            true => " last_tile_dim_replicate",
            false => "",
        };
        format!("{{devices=[{}]<={iota}{last}}}", list(&tiles))
    }
}

impl Program {
    /// Sets the device mesh the program's shardings name (see the [module](self)).
    ///
    /// ```
    /// use xla_bcast::stablehlo::{Mesh, PartitionSpec, Program};
    ///
    /// let mut p = Program::new("m");
    /// p.set_mesh(Mesh::new(&[("x", 8)]).unwrap()).unwrap();
    /// let a = p.parameter::<f32>(&[16]);
    /// p.shard(a, &PartitionSpec::new(&[&["x"]])).unwrap();
    /// assert_eq!(p.mesh().map(|m| m.devices()), Some(8));
    /// // 16 rows do not split over 3 devices: the sharding recorded no longer fits.
    /// assert!(p.set_mesh(Mesh::new(&[("x", 3)]).unwrap()).is_err());
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::Sharding`] when shardings recorded on another mesh would not fit
    /// this one.
    pub fn set_mesh(&mut self, mesh: Mesh) -> Result<()> {
        for (index, spec) in &self.shardings {
            self.check_spec(&mesh, *index, spec)?;
        }
        self.mesh = Some(mesh);
        Ok(())
    }

    /// The program's mesh, if it has one ([`Program::set_mesh`] shows it).
    ///
    /// ```
    /// use xla_bcast::stablehlo::{Mesh, Program};
    ///
    /// let mut p = Program::new("sharded");
    /// assert!(p.mesh().is_none());
    /// p.set_mesh(Mesh::new(&[("data", 2)]).unwrap()).unwrap();
    /// assert_eq!(p.mesh().unwrap().devices(), 2);
    /// ```
    pub fn mesh(&self) -> Option<&Mesh> {
        self.mesh.as_ref()
    }

    /// Splits `x` over the mesh as `spec` says (JAX's `NamedSharding(mesh, spec)`): a parameter
    /// or an output is exported with its `sdy.sharding`, and any other value is pinned there
    /// (JAX's `with_sharding_constraint`: an `sdy.sharding_constraint`).
    ///
    /// ```
    /// use xla_bcast::stablehlo::{Mesh, PartitionSpec, Program};
    ///
    /// let mut p = Program::new("dense");
    /// p.set_mesh(Mesh::new(&[("data", 4), ("model", 2)]).unwrap()).unwrap();
    /// let x = p.parameter::<f32>(&[8, 6]);
    /// p.shard(x, &PartitionSpec::new(&[&["data"], &[]])).unwrap();
    /// let s = p.reduce_sum(x, &[0]).unwrap(); // XLA adds an all-reduce over `data`
    /// p.output(s).unwrap();
    /// let text = p.to_stablehlo();
    /// assert!(text.contains("mhlo.num_partitions = 8"));
    /// assert!(text.contains(r#"sdy.mesh @mesh = <["data"=4, "model"=2]>"#));
    /// assert!(text.contains(r#"{sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}"#));
    /// let e = p.exp(x).unwrap();
    /// p.shard(e, &PartitionSpec::new(&[&[], &["model"]])).unwrap(); // pinned
    /// let text = p.to_stablehlo();
    /// assert!(text.contains(r#"sdy.sharding_constraint %2 <@mesh, [{}, {"model"}]> : tensor<8x6xf32>"#));
    /// // A split dim must divide evenly; each axis once per array.
    /// assert!(p.shard(x, &PartitionSpec::new(&[&[], &["data"]])).is_err());
    /// assert!(p.shard(x, &PartitionSpec::new(&[&["data"], &["data"]])).is_err());
    /// ```
    ///
    /// # Errors
    /// [`BroadcastError::Sharding`], naming the array, the dim and the axis: no mesh, a spec
    /// of another rank, an axis the mesh lacks or named twice, a dim its axes' device count
    /// does not divide.
    pub fn shard(&mut self, x: Value, spec: &PartitionSpec) -> Result<()> {
        self.own("shard", &[x])?;
        let Some(mesh) = &self.mesh else {
            return Err(BroadcastError::Sharding {
                array: self.array_name(x.index),
                dim: None,
                axis: None,
                reason: "the program has no mesh: call `set_mesh` first".to_string(),
            });
        };
        self.check_spec(mesh, x.index, spec)?;
        self.shardings.retain(|(i, _)| *i != x.index);
        self.shardings.push((x.index, spec.clone()));
        Ok(())
    }

    /// `spec`'s errors for the array of node `index` on `mesh`.
    fn check_spec(&self, mesh: &Mesh, index: usize, spec: &PartitionSpec) -> Result<()> {
        let shape = &self.nodes[index].shape;
        let refuse = |dim: Option<usize>, axis: Option<&String>, reason: String| {
            Err(BroadcastError::Sharding {
                array: self.array_name(index),
                dim,
                axis: axis.cloned(),
                reason,
            })
        };
        if spec.dims.len() != shape.len() {
            let (n, rank) = (spec.dims.len(), shape.len());
            let reason = format!("the spec has {n} dims, the array {shape:?} has {rank}");
            return refuse(None, None, reason);
        }
        let mut seen: Vec<&str> = Vec::new();
        for (d, axes) in spec.dims.iter().enumerate() {
            let mut devices = 1usize;
            for a in axes {
                let Some(p) = mesh.position(a) else {
                    return refuse(Some(d), Some(a), "the mesh has no such axis".to_string());
                };
                if seen.contains(&a.as_str()) {
                    let reason = "an array uses each mesh axis once".to_string();
                    return refuse(Some(d), Some(a), reason);
                }
                seen.push(a);
                devices *= mesh.axes[p].1;
            }
            if !shape[d].is_multiple_of(devices) {
                let n = shape[d];
                let reason =
                    format!("dim {d} of size {n} does not split evenly over {devices} devices");
                return refuse(Some(d), axes.last(), reason);
            }
        }
        Ok(())
    }

    /// How errors name the array of node `index`.
    fn array_name(&self, index: usize) -> String {
        if let Some(k) = self.params.iter().position(|p| p.index == index) {
            return format!("parameter {k} {:?}", self.nodes[index].shape);
        }
        if let Some(k) = self.outputs.iter().position(|o| o.index == index) {
            return format!("output {k} {:?}", self.nodes[index].shape);
        }
        format!("value %{index} {:?}", self.nodes[index].shape)
    }

    /// Node `index`'s sharding in `dialect`, if it has one: as an argument's or a result's
    /// attribute, or (`pin`: a value `v` of type `ty`) as the constraint that pins it.
    pub(super) fn sharding_of(
        &self,
        index: usize,
        dialect: ShardingDialect,
        pin: Option<(&str, &str)>,
    ) -> Option<String> {
        let mesh = self.mesh.as_ref()?;
        let (_, spec) = self.shardings.iter().find(|(i, _)| *i == index)?;
        Some(match (dialect, pin) {
            (ShardingDialect::Shardy, None) => {
                format!(" {{sdy.sharding = #sdy.sharding{}}}", spec.sdy())
            }
            (ShardingDialect::Shardy, Some((v, ty))) => {
                format!("sdy.sharding_constraint {v} {} : {ty}", spec.sdy())
            }
            (ShardingDialect::Gspmd, None) => {
                format!(" {{mhlo.sharding = \"{}\"}}", spec.gspmd(mesh))
            }
            (ShardingDialect::Gspmd, Some((v, ty))) => format!(
                "stablehlo.custom_call @Sharding({v}) {{mhlo.sharding = \"{}\"}} : ({ty}) -> {ty}",
                spec.gspmd(mesh)
            ),
        })
    }
}
