#!/bin/sh
# Wall time per epoch of heat_diffusion with an asynchronous checkpoint every epoch,
# against no checkpoint at all and a synchronous one, in alternated rounds (A B C C B A ...).
# Per run: the median interval between consecutive "epoch N done" log lines after the first
# epoch (an interval holds the epoch and whatever its checkpoint made the job wait), and the
# median time the job was blocked per checkpoint (metrics.jsonl: the copy and the layout plus
# the wait for the end when asynchronous, the whole save when synchronous). Prints one line per
# run, the medians per mode, and each round's ratio to no checkpoint with their median.
#
#   scripts/async_overhead.sh [BUILD_DIR] [DIR] [ROUNDS] [RANKS] [MIB_PER_RANK] [SWEEPS] [EPOCHS]
#
# The defaults are the target's setup (at most 1.10 times the time without checkpoints):
# 2 ranks x 256 MiB, 24 sweeps per epoch (about 1 s on the machine of docs/benchmarks.md: pick
# SWEEPS for about 1 s on yours), 10 epochs, 3 rounds.
set -eu
build=${1:-build}
dir=${2:-/tmp/epochrun-async-overhead}
rounds=${3:-3}
ranks=${4:-2}
mib=${5:-256}
sweeps=${6:-24}
epochs=${7:-10}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$dir"
run() {  # mode
  rm -rf "$dir/D" "$dir/log"
  case $1 in
    none) flags="--no-checkpoints" ;;
    async) flags="--checkpoint-dir $dir/D --keep-last 2 --async-checkpoint" ;;
    sync) flags="--checkpoint-dir $dir/D --keep-last 2" ;;
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
}
results=$dir/results
: >"$results"
i=0
while [ $i -lt "$rounds" ]; do
  for mode in none async sync sync async none; do
    run $mode | tee -a "$results"
  done
  i=$((i + 1))
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {m: statistics.median(float(r[1]) for r in rows if r[0] == m) for m in ("none", "async", "sync")}
blk = {m: statistics.median(float(r[2]) for r in rows if r[0] == m) for m in ("async", "sync")}
print(f"median wall s/epoch: none {med['none']:.3f}  async {med['async']:.3f} ({med['async']/med['none']:.2f}x)"
      f"  sync {med['sync']:.3f} ({med['sync']/med['none']:.2f}x)")
print(f"median blocked s per checkpoint: async {blk['async']:.3f}  sync {blk['sync']:.3f}")
# Each round runs every mode twice (none async sync sync async none): its ratio is the mode's
# mean over the round against no checkpoint's, and the median over rounds is what the target
# is about (a ratio of two runs seconds apart, as epochrun bench's).
def per_round(mode):
    ratios = []
    for at in range(0, len(rows) - 5, 6):
        rnd = rows[at:at + 6]
        mean = lambda m: statistics.mean(float(r[1]) for r in rnd if r[0] == m)
        ratios.append(mean(mode) / mean("none"))
    return ratios
for mode in ("async", "sync"):
    ratios = per_round(mode)
    print(f"{mode} per round: " + " ".join(f"{x:.2f}" for x in ratios) +
          f"  median {statistics.median(ratios):.2f}x")
PY
