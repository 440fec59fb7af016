#!/usr/bin/env bash
# The sweeps behind docs/benchmarks.md: `epochrun bench` at 1, 16, 64 and 256 MiB per rank in
# one blob, then 1, 10, 100 and 1000 blobs at 64 MiB per rank, each into OUT/*.json with its
# table in OUT/tables.txt, and the plot OUT/bench.svg (scripts/plot_bench.py).
#
#   scripts/bench_sweep.sh OUT [RANKS] [more epochrun bench options, e.g. --dir /mnt/x/b --cold]
#
# EPOCHRUN (default build/epochrun) and MPIRUN (default mpirun) select the programs.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: scripts/bench_sweep.sh OUT [RANKS] [epochrun bench options]}"
ranks="${2:-3}"
shift $(($# >= 2 ? 2 : 1))
epochrun="${EPOCHRUN:-$root/build/epochrun}"
mkdir -p "$out"
: >"$out/tables.txt"

bench() {
  local name="$1"
  shift
  echo "+ mpirun -np $ranks epochrun bench $* --json $out/$name.json" | tee -a "$out/tables.txt"
  "${MPIRUN:-mpirun}" -np "$ranks" "$epochrun" bench "$@" --json "$out/$name.json" | tee -a "$out/tables.txt"
}

for mib in 1 16 64 256; do
  bench "size-$mib" --mib-per-rank "$mib" "$@"
done
for blobs in 10 100 1000; do
  bench "blobs-$blobs" --mib-per-rank 64 --blobs "$blobs" "$@"
done
python3 "$root/scripts/plot_bench.py" "$out/bench.svg" "$out"/*.json
echo "bench_sweep: tables in $out/tables.txt, plot in $out/bench.svg"
