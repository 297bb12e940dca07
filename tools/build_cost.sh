#!/usr/bin/env bash
# What a one-line dependent pays to build: a one-file program calling `add_bcast` and
# `mul_bcast`, built from a fresh target directory against this checkout (default features:
# Rayon included; and again with the `stablehlo` feature on), beside the same program written
# on ndarray with its `rayon` feature, in one run. Prints wall seconds, CPU seconds (user + sys of
# cargo and every rustc) and the peak resident memory of the largest process (rustc), for
# release and debug builds, and the ratios. The two builds alternate for `rounds` rounds
# (default 3) and the medians are printed: on a shared VM one build swings by 10%.
#
#     tools/build_cost.sh [release|debug|both] [rounds]    # default: both 3
#
# Needs GNU time (/usr/bin/time). The registry sources must be fetched (any earlier build does).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
which="${1:-both}"
rounds="${2:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/with/src" "$work/alone/src" "$work/programs/src"
cat >"$work/with/Cargo.toml" <<EOF
[package]
name = "with-xla-bcast"
version = "0.0.0"
edition = "2021"
[dependencies]
ndarray = "0.17"
xla-bcast = { path = "$repo" }
EOF
cat >"$work/with/src/main.rs" <<'EOF'
use ndarray::{Array1, Array2};
use xla_bcast::prelude::*;
fn main() {
    let x = Array2::<f32>::ones((64, 64));
    let v = Array1::from_elem(64, 1.0f32);
    let y = x.add_bcast(&v, &[1]).unwrap().mul_bcast(&v, &[0]).unwrap();
    println!("{}", y.sum());
}
EOF
sed -e 's/^name = "with-xla-bcast"/name = "with-programs"/' \
    -e "s|^xla-bcast = .*|xla-bcast = { path = \"$repo\", features = [\"stablehlo\"] }|" \
    "$work/with/Cargo.toml" >"$work/programs/Cargo.toml"
cp "$work/with/src/main.rs" "$work/programs/src/main.rs"
cat >"$work/alone/Cargo.toml" <<EOF
[package]
name = "on-ndarray"
version = "0.0.0"
edition = "2021"
[dependencies]
ndarray = { version = "0.17", features = ["rayon"] }
EOF
cat >"$work/alone/src/main.rs" <<'EOF'
use ndarray::{Array1, Array2, Axis};
fn main() {
    let x = Array2::<f32>::ones((64, 64));
    let v = Array1::from_elem(64, 1.0f32);
    let y = (&x + &v.view().insert_axis(Axis(0))) * &v.view().insert_axis(Axis(1));
    println!("{}", y.sum());
}
EOF

# One build from a fresh target directory: "wall cpu peak_gib".
measure() {
    local dir="$1" profile="$2" flag=()
    [ "$profile" = release ] && flag=(--release)
    rm -rf "$dir/target"
    (cd "$dir" && cargo generate-lockfile -q --offline 2>/dev/null || cargo generate-lockfile -q)
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" \
        env CARGO_INCREMENTAL=0 cargo build -q "${flag[@]}" --manifest-path "$dir/Cargo.toml" \
        --target-dir "$dir/target"
    read -r wall user sys kib <"$work/time"
    awk -v w="$wall" -v u="$user" -v s="$sys" -v k="$kib" \
        'BEGIN { printf "%.1f %.1f %.2f\n", w, u + s, k / 1048576 }'
}

# The median of the numbers on standard input.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for profile in release debug; do
    [ "$which" = both ] || [ "$which" = "$profile" ] || continue
    : >"$work/alone.txt"
    : >"$work/with.txt"
    : >"$work/programs.txt"
    for _ in $(seq "$rounds"); do
        measure "$work/alone" "$profile" >>"$work/alone.txt"
        measure "$work/with" "$profile" >>"$work/with.txt"
        measure "$work/programs" "$profile" >>"$work/programs.txt"
    done
    col() { cut -d' ' -f"$2" "$work/$1.txt" | median; }
    aw=$(col alone 1) ac=$(col alone 2) am=$(col alone 3)
    for dep in with programs; do
        xw=$(col $dep 1) xc=$(col $dep 2) xm=$(col $dep 3)
        what="with xla_bcast"
        [ "$dep" = programs ] && what="with xla_bcast and stablehlo"
        echo "$profile (medians of $rounds): ndarray with rayon ${aw} s wall, ${ac} s CPU, peak ${am} GiB;" \
            "$what ${xw} s wall, ${xc} s CPU, peak ${xm} GiB;" \
            "$(awk -v a="$aw" -v x="$xw" -v c="$ac" -v d="$xc" 'BEGIN { printf "%.1fx wall, %.2fx CPU", x / a, d / c }')"
    done
    echo "  CPU s, alone: $(cut -d' ' -f2 "$work/alone.txt" | tr '\n' ' ')with: $(cut -d' ' -f2 "$work/with.txt" | tr '\n' ' ')programs: $(cut -d' ' -f2 "$work/programs.txt" | tr '\n' ' ')"
done
