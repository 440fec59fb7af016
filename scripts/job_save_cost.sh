#!/bin/sh
# What a synchronous checkpoint costs heat_diffusion, measured from outside as a user would:
# whole `mpirun ... epochrun run` processes, against `dd` writing the same bytes.
#
#   scripts/job_save_cost.sh [BUILD_DIR] [DIR] [ROUNDS] [RANKS] [MIB_PER_RANK] [EPOCHS] [-- RUN-OPTIONS...]
#
# Each round runs, in the order A B C D, then D C B A:
#   A  heat_diffusion on RANKS ranks, MIB_PER_RANK MiB of field per rank, 1 sweep per epoch,
#      EPOCHS epochs, a synchronous checkpoint after init and every epoch (EPOCHS + 1 saves)
#      and RUN-OPTIONS (e.g. --array-io mpiio);
#   B  the same run with --no-checkpoints;
#   C  RANKS `dd bs=1M count=MIB_PER_RANK conv=fsync` at once, one file per rank (the limit the
#      cost is held to);
#   D  the same with oflag=direct (the raw write as a directly written save makes it);
#   E  RANKS `dd` at once into ONE new file, each its own MIB_PER_RANK MiB at its offset
#      (`seek`, conv=notrunc,fsync): the floor of the design's one shared file per epoch;
#   F  the same with oflag=direct.
# A save's cost is (A - B) / saves; the script prints each round's cost, its ratio to C, to D
# and to the one-file floor (per round the faster of E and F), and the medians. Defaults: build,
# /tmp/epochrun-job-save-cost, 5 rounds, 3 ranks, 256 MiB, 3 epochs (the figures of
# docs/benchmarks.md, "Inside a job"). Never time while anything else runs on the machine.
set -eu
build=${1:-build}
dir=${2:-/tmp/epochrun-job-save-cost}
rounds=${3:-5}
ranks=${4:-3}
mib=${5:-256}
epochs=${6:-3}
if [ $# -gt 6 ]; then shift 6; else shift $#; fi
[ "${1:-}" = -- ] && shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
epochrun=$(cd "$build" && pwd)/epochrun
[ -x "$epochrun" ] || { echo "job_save_cost.sh: no $build/epochrun: build it first" >&2; exit 2; }
mkdir -p "$dir"
# MIB_PER_RANK MiB per rank: rows of 1024 f64 cells (8 KiB) for RANKS ranks.
rows=$((mib * 128 * ranks))
now() { date +%s.%N; }
run() {  # checkpoints|none [RUN-OPTIONS...]: prints the run's wall seconds
  mode=$1
  shift
  rm -rf "$dir/ck"
  if [ "$mode" = checkpoints ]; then flags="--checkpoint-dir $dir/ck --keep-last 2"; else flags=--no-checkpoints; fi
  start=$(now)
  # shellcheck disable=SC2086
  mpirun -np "$ranks" "$epochrun" run --job heat_diffusion --heat_diffusion.rows "$rows" \
    --heat_diffusion.sweeps_per_epoch 1 --heat_diffusion.max_epochs 1000 \
    --heat_diffusion.tolerance 0 --heat_diffusion.output_file "" --num-epochs "$epochs" \
    --log-level warn $flags "$@" >"$dir/log" 2>&1 || { cat "$dir/log" >&2; exit 1; }
  python3 -c "print(round($(now) - $start, 4))"
}
limit() {  # extra dd flag [one]: prints the seconds of RANKS dd at once, a new file each or,
           # with `one`, all into one new file, each at its own offset
  rm -f "$dir"/dd-* "$dir/one"
  start=$(now)
  r=0
  while [ $r -lt "$ranks" ]; do
    if [ "${2:-}" = one ]; then
      of=$dir/one place="seek=$((r * mib)) conv=notrunc,fsync"
    else
      of=$dir/dd-$r place=conv=fsync
    fi
    # shellcheck disable=SC2086
    dd if=/dev/zero of="$of" bs=1M count="$mib" $place $1 status=none &
    r=$((r + 1))
  done
  wait
  end=$(now)
  rm -f "$dir"/dd-* "$dir/one"
  python3 -c "print(round($end - $start, 4))"
}
saves=$((epochs + 1))
: >"$dir/results"
round=0
while [ "$round" -lt "$rounds" ]; do
  if [ $((round % 2)) = 0 ]; then order="A B C D E F"; else order="F E D C B A"; fi
  for step in $order; do
    case $step in
      A) a=$(run checkpoints "$@") ;;
      B) b=$(run none "$@") ;;
      C) c=$(limit "") ;;
      D) d=$(limit oflag=direct) ;;
      E) e=$(limit "" one) ;;
      F) f=$(limit oflag=direct one) ;;
    esac
  done
  echo "$round $a $b $c $d $e $f" >>"$dir/results"
  echo "round $round: with checkpoints $a s, without $b s, dd $c s, dd direct $d s," \
    "one file $e s, one file direct $f s"
  round=$((round + 1))
done
python3 - "$dir/results" "$saves" <<'PY'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1])]
saves = int(sys.argv[2])
cost = [(r[1] - r[2]) / saves for r in rows]
rows = [r + [min(r[5], r[6])] for r in rows]
print(f"save cost per round (s): {', '.join(f'{x:.3f}' for x in cost)}")
for name, i in (("dd conv=fsync", 3), ("dd oflag=direct conv=fsync", 4),
                ("one file, dd conv=fsync", 5), ("one file, dd oflag=direct conv=fsync", 6),
                ("the one-file floor (the faster of the two)", 7)):
    ratios = [c / r[i] for c, r in zip(cost, rows)]
    print(f"against {name}: median limit {statistics.median(r[i] for r in rows):.3f} s, "
          f"ratios {', '.join(f'{x:.2f}' for x in ratios)}, median {statistics.median(ratios):.3f}")
PY
