#!/bin/sh
# Wall time per epoch of heat_diffusion with an asynchronous checkpoint every epoch, and with
# one staged on node-local storage (--local-dir $LOCAL_DIR, default under /dev/shm, as SCR's
# cache), against no checkpoint at all and a synchronous one, in alternated rounds
# (A B C D D C B A ...).
# Per run: the median interval between consecutive "epoch N done" log lines after the first
# epoch (an interval holds the epoch and whatever its checkpoint made the job wait), and the
# median time the job was blocked per checkpoint (metrics.jsonl: the copy and the layout plus
# the wait for the end when asynchronous, the whole save when synchronous). Prints one line per
# run, the medians per mode, and each round's ratio to no checkpoint with their median.
#
#   scripts/async_overhead.sh [BUILD_DIR] [DIR] [ROUNDS] [RANKS] [MIB_PER_RANK] [SWEEPS] [EPOCHS]
#
# LOCAL_DIR is made and removed on every node through $ON_EVERY_NODE when set (inside a SLURM
# allocation across nodes: ON_EVERY_NODE="srun --ntasks-per-node=1"), as node-local storage is.
#
# The defaults are the target's setup (at most 1.10 times the time without checkpoints):
# 2 ranks x 256 MiB, 24 sweeps per epoch (about 1 s on the machine of docs/benchmarks-history.md,
# "What a checkpoint every epoch costs a job": pick SWEEPS for about 1 s on yours), 10 epochs,
# 3 rounds.
set -eu
build=${1:-build}
dir=${2:-/tmp/epochrun-async-overhead}
rounds=${3:-3}
ranks=${4:-2}
mib=${5:-256}
sweeps=${6:-24}
epochs=${7:-10}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
local_dir=${LOCAL_DIR:-/dev/shm/epochrun-async-overhead-local}
on_every_node=${ON_EVERY_NODE:-}
mkdir -p "$dir"
run() {  # mode
  rm -rf "$dir/D" "$dir/log"
  # shellcheck disable=SC2086
  $on_every_node rm -rf "$local_dir"
  case $1 in
    none) flags="--no-checkpoints" ;;
    async) flags="--checkpoint-dir $dir/D --keep-last 2 --async-checkpoint" ;;
    sync) flags="--checkpoint-dir $dir/D --keep-last 2" ;;
    local)
      # shellcheck disable=SC2086
      $on_every_node mkdir -p "$local_dir"
      flags="--checkpoint-dir $dir/D --keep-last 2 --local-dir $local_dir"
      ;;
  esac
  # shellcheck disable=SC2086
  (cd "$dir" && mpirun -np "$ranks" "$OLDPWD/$build/epochrun" run --job heat_diffusion $flags \
    --heat_diffusion.rows $((mib * 128 * ranks)) --heat_diffusion.sweeps_per_epoch "$sweeps" \
    --heat_diffusion.max_epochs "$epochs" --heat_diffusion.tolerance 0 >"$dir/log" 2>&1)
  python3 - "$1" "$dir" <<'PY'
import json, re, statistics, sys
from datetime import datetime
mode, d = sys.argv[1], sys.argv[2]
times = {}
for line in open(d + "/log"):
    m = re.match(r"\[(.*?)\] \[rank 0\] \[info\] epoch (\d+) done", line)
    if m:
        times[int(m.group(2))] = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f")
epochs = sorted(times)
gaps = [(times[b] - times[a]).total_seconds() for a, b in zip(epochs[1:], epochs[2:])]
# Per checkpoint and rank: the copy and layout (epoch line) plus the wait for its end (save line).
blocked = {}
try:
    for line in open(d + "/D/metrics.jsonl"):
        r = json.loads(line)
        if r["event"] in ("epoch", "save") and r["epoch"] > 1:
            for x in r["ranks"]:
                key = (r["epoch"], x["rank"])
                blocked[key] = blocked.get(key, 0) + x.get("blocked_seconds", 0)
except FileNotFoundError:
    pass
blocked = list(blocked.values())
print(f"{mode} {statistics.median(gaps):.3f} {statistics.median(blocked) if blocked else 0:.3f}")
PY
  # shellcheck disable=SC2086
  $on_every_node rm -rf "$local_dir"
}
results=$dir/results
: >"$results"
i=0
while [ $i -lt "$rounds" ]; do
  for mode in none async sync local local sync async none; do
    run $mode | tee -a "$results"
  done
  i=$((i + 1))
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
modes = ("async", "sync", "local")
med = {m: statistics.median(float(r[1]) for r in rows if r[0] == m) for m in ("none",) + modes}
blk = {m: statistics.median(float(r[2]) for r in rows if r[0] == m) for m in modes}
print("median wall s/epoch: none {:.3f}  ".format(med["none"]) +
      "  ".join(f"{m} {med[m]:.3f} ({med[m]/med['none']:.2f}x)" for m in modes))
print("median blocked s per checkpoint: " + "  ".join(f"{m} {blk[m]:.3f}" for m in modes))
# Each round runs every mode twice (none async sync local local sync async none): its ratio is
# the mode's mean over the round against no checkpoint's, and the median over rounds is what
# the target is about (a ratio of two runs seconds apart, as epochrun bench's).
def per_round(mode, column):
    ratios = []
    for at in range(0, len(rows) - 7, 8):
        rnd = rows[at:at + 8]
        mean = lambda m: statistics.mean(float(r[column]) for r in rnd if r[0] == m)
        ratios.append(mean(mode) / mean("none" if column == 1 else "sync"))
    return ratios
for mode in modes:
    ratios = per_round(mode, 1)
    print(f"{mode} per round: " + " ".join(f"{x:.2f}" for x in ratios) +
          f"  median {statistics.median(ratios):.2f}x")
for mode in ("async", "local"):
    ratios = per_round(mode, 2)
    print(f"{mode} blocked per checkpoint against sync's, per round: " +
          " ".join(f"{x:.2f}" for x in ratios) + f"  median {statistics.median(ratios):.2f}x")
PY
