#!/bin/sh
# The fixed cost of the save a job really makes, as a user would see it: heat_diffusion with
# 64 KiB of field per rank (8 rows of 1024 f64 cells per rank, split as the job splits it: bands
# of rows up to 3 ranks, a 2-D grid beyond), the slowest rank's save_seconds of every epoch in
# metrics.jsonl, against the hand-made commit of the same bytes that `epochrun bench --scale`
# times (create, pwrite + fsync on every rank, gather, rename, directory fsync, broadcast).
#
#   scripts/job_fixed_cost.sh [BUILD_DIR] [DIR] [ROUNDS] [RANKS] [EPOCHS]
#
# Each round runs the job (EPOCHS epochs, default 12) and `bench --scale --rounds 5` in
# alternated order, and prints the job's median save (median over the epochs of the slowest
# rank's), the hand-made commit's median, and their ratio; then the median ratio over the
# rounds. Defaults: build, /tmp/epochrun-job-fixed-cost, 3 rounds, 3 ranks. Never time while
# anything else runs on the machine.
set -eu
build=${1:-build}
dir=${2:-/tmp/epochrun-job-fixed-cost}
rounds=${3:-3}
ranks=${4:-3}
epochs=${5:-12}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
epochrun=$(cd "$build" && pwd)/epochrun
[ -x "$epochrun" ] || { echo "job_fixed_cost.sh: no $build/epochrun: build it first" >&2; exit 2; }
mkdir -p "$dir"
job() {  # prints the median over the epochs of the slowest rank's save_seconds
  rm -rf "$dir/ck"
  mpirun -np "$ranks" "$epochrun" run --job heat_diffusion --heat_diffusion.rows $((8 * ranks)) \
    --heat_diffusion.columns 1024 --heat_diffusion.sweeps_per_epoch 1 \
    --heat_diffusion.max_epochs 1000 --heat_diffusion.tolerance 0 \
    --heat_diffusion.output_file "" --num-epochs "$epochs" --checkpoint-dir "$dir/ck" \
    --log-level warn >"$dir/log" 2>&1 || { cat "$dir/log" >&2; exit 1; }
  python3 - "$dir/ck/metrics.jsonl" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
saves = [max(r["save_seconds"] for r in l["ranks"] if "save_seconds" in r)
         for l in lines if l.get("event") == "epoch" and any("save_seconds" in r for r in l["ranks"])]
paths = {k: v for l in lines for k, v in l.get("array_io", {}).items()}
print(statistics.median(saves[1:]), json.dumps(paths).replace(" ", ""))
PY
}
handmade() {  # prints the hand-made commit's median seconds
  rm -rf "$dir/scale"
  mpirun -np "$ranks" "$epochrun" bench --scale --rounds 5 --layout-ranks none \
    --dir "$dir/scale" --json "$dir/scale.json" >"$dir/bench.log" 2>&1 ||
    { cat "$dir/bench.log" >&2; exit 1; }
  python3 -c 'import json, sys
rows = json.load(open(sys.argv[1]))
print(next(r["limit_median_seconds"] for r in rows if r["name"] == "scale_array_save"))' "$dir/scale.json"
}
: >"$dir/results"
round=0
while [ "$round" -lt "$rounds" ]; do
  if [ $((round % 2)) = 0 ]; then
    j=$(job); h=$(handmade)
  else
    h=$(handmade); j=$(job)
  fi
  echo "$j $h" >>"$dir/results"
  echo "round $round: job save $j, hand-made commit $h s"
  round=$((round + 1))
done
python3 - "$dir/results" "$ranks" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
ratios = [float(j) / float(h) for j, _, h in rows]
print(f"{sys.argv[2]} ranks: job save / hand-made commit per round: "
      f"{', '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.2f} "
      f"(array paths {rows[-1][1]})")
PY
