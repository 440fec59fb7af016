#!/bin/sh
# The cost of committing a tiny checkpoint with 10 and with 3,000 epochs already in
# the directory (tmpfs, so that the disk does not hide the bookkeeping). Each run of 40 tiny
# sum_pipeline epochs (one rank, the index and --keep-last 100000 retention after every commit)
# goes into a directory pre-filled with the older epochs; the figure is the median save_seconds
# of metrics.jsonl (save, commit, index and retention). Rounds alternate (A B B A).
#
#   scripts/commit_cost.sh [BUILD_DIR] [ROUNDS]     (root: mounts a tmpfs)
set -eu
build=$(cd "${1:-build}" && pwd)
rounds=${2:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mnt=$(mktemp -d)
mount -t tmpfs -o size=512m tmpfs "$mnt"
trap 'umount "$mnt"; rmdir "$mnt"' EXIT
# One real tiny checkpoint to copy under the older epochs' names.
(cd "$mnt" && "$build/epochrun" run --job sum_pipeline --checkpoint-dir seed --num-epochs 1 \
  --log-level warn)
run() {  # history
  rm -rf "$mnt/D"
  mkdir "$mnt/D"
  i=0
  while [ $i -lt "$1" ]; do
    cp "$mnt/seed/epoch-000000.h5" "$mnt/D/epoch-$(printf %06d $((100000 + i))).h5"
    i=$((i + 1))
  done
  (cd "$mnt" && "$build/epochrun" run --job sum_pipeline --checkpoint-dir D \
    --sum_pipeline.num_items 40 --sum_pipeline.items_per_epoch 1 --keep-last 100000 \
    --log-level warn)
  python3 - "$1" "$mnt/D/metrics.jsonl" <<'PY'
import json, statistics, sys
saves = [r["ranks"][0]["save_seconds"] for r in map(json.loads, open(sys.argv[2]))
         if r["event"] == "epoch" and r["epoch"] > 0]
print(sys.argv[1], f"{statistics.median(saves) * 1000:.3f}")
PY
}
results=$mnt/results
: >"$results"
r=0
while [ $r -lt "$rounds" ]; do
  for history in 10 3000 3000 10; do
    run $history | tee -a "$results"
  done
  r=$((r + 1))
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
m = {h: statistics.median(float(r[1]) for r in rows if r[0] == h) for h in ("10", "3000")}
print(f"median commit ms: 10 epochs {m['10']:.3f}, 3000 epochs {m['3000']:.3f}, "
      f"ratio {m['3000'] / m['10']:.2f}")
PY
