#!/usr/bin/env bash
# The fixed cost of a checkpoint as the rank count grows (docs/scaling.md): `epochrun bench
# --scale` at each rank count, every run's JSON and table into OUT, then the Markdown table and
# the plot OUT/scale.svg (scripts/plot_scale.py). The ranks are oversubscribed on this machine's
# cores, unbound (--bind-to none), as a laptop's `mpirun -np 96` would be.
#
#   scripts/scale_bench.sh OUT [RANK COUNTS, default "3 6 12 24 48 96"] [-- more bench options]
#
# EPOCHRUN (default build/epochrun), MPIRUN (default mpirun) and DIR (the directory to measure
# on, default /tmp) select the programs and the file system.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: scripts/scale_bench.sh OUT [RANK COUNTS] [-- bench options]}"
shift
counts="3 6 12 24 48 96"
if [[ $# -gt 0 && "$1" != "--" ]]; then
  counts="$1"
  shift
fi
[[ "${1:-}" == "--" ]] && shift
epochrun="${EPOCHRUN:-$root/build/epochrun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
mkdir -p "$out"
: >"$out/tables.txt"
first=1
for ranks in $counts; do
  layout=()
  # The one-process lay-out does not depend on the ranks running: once is enough.
  if [[ $first == 1 ]]; then
    # One operand whose value is a comma-separated list.
    # shellcheck disable=SC2054
    layout=(--layout-ranks 1000,10000,100000)
    first=0
  else
    layout=(--layout-ranks none)
  fi
  work="${DIR:-/tmp}/epochrun-scale-$$-$ranks"
  echo "+ mpirun -np $ranks --oversubscribe --bind-to none epochrun bench --scale ${layout[*]} $*" |
    tee -a "$out/tables.txt"
  "${MPIRUN:-mpirun}" -np "$ranks" --oversubscribe --bind-to none "$epochrun" bench --scale \
    --dir "$work" --json "$out/scale-$ranks.json" "${layout[@]}" "$@" | tee -a "$out/tables.txt"
done
python3 "$root/scripts/plot_scale.py" "$out/scale.svg" "$out"/scale-*.json | tee "$out/table.md"
echo "scale_bench: tables in $out/tables.txt, Markdown in $out/table.md, plot in $out/scale.svg"
