#!/bin/sh
# epochrun's load of a checkpoint against the h5py + mpi4py peer on the same file (the target:
# faster than the peer, checksums still verified).
#
#   scripts/peer_load.sh [--quick] [--cold] [--rounds N] [--ranks R] [--mib-per-rank M]
#                        [--dir DIR] [--build BUILD_DIR]
#
# Makes one checkpoint of R ranks x M MiB (default 3 x 256: heat_diffusion, 2 epochs, only the
# last kept) in DIR (default /tmp/epochrun-peer-load), then times in rounds of alternated order
# (A B C, then C B A, ...; default 5 rounds) three loads of that file on R ranks:
#   epochrun       a resume of that epoch (`epochrun run --resume-from-epoch 2`, which stops at
#                  once: the job had reached its epoch limit); the seconds are the slowest rank's
#                  load_seconds of the "load" event of metrics.jsonl (integrity header, every
#                  layout check, every blob's xxh64: epochrun always verifies)
#   h5py           scripts/h5py_peer_load.py: h5py's mpio driver, each rank reads its node's
#                  blobs into fresh numpy arrays; the slowest rank, barrier to barrier
#   h5py_verify    the same plus each blob's xxh64 compared with the file's checksum table
# and prints each round, then the median seconds and the median over rounds of the per-round
# ratio epochrun / peer. Reads come from the page cache the write and the previous reads filled
# unless --cold, which drops it (sync; echo 3 > /proc/sys/vm/drop_caches: root only) before
# every load. --quick: 16 MiB per rank, 1 round, to check that everything works.
#
# Needs the Python modules h5py (built with MPI), mpi4py, xxhash and numpy; without them it says
# which Debian packages to install and exits with 2. $PYTHON picks the interpreter (default
# /usr/bin/python3, where Debian's packages install, else python3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=build
dir=/tmp/epochrun-peer-load
rounds=5
ranks=3
mib=256
cold=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) mib=16 rounds=1 ;;
    --cold) cold=1 ;;
    --rounds) rounds=$2; shift ;;
    --ranks) ranks=$2; shift ;;
    --mib-per-rank) mib=$2; shift ;;
    --dir) dir=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "peer_load.sh: unknown argument '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
packages="python3-h5py-mpi python3-mpi4py python3-xxhash python3-numpy"
if ! H5PY_ALWAYS_USE_MPI=1 "$PYTHON" -c 'import h5py, mpi4py, numpy, xxhash, sys
sys.exit(0 if h5py.get_config().mpi else 1)' >/dev/null 2>&1; then
  echo "peer_load.sh: $PYTHON lacks h5py with MPI, mpi4py, xxhash or numpy: apt-get install $packages" >&2
  exit 2
fi
if ! epochrun=$(cd "$build" 2>/dev/null && pwd)/epochrun || [ ! -x "$epochrun" ]; then
  echo "peer_load.sh: no $build/epochrun: build it first (cmake --build $build) or pass --build DIR" >&2
  exit 2
fi
if [ $cold = 1 ] && ! [ -w /proc/sys/vm/drop_caches ]; then
  echo "peer_load.sh: --cold drops the page cache, which needs root" >&2
  exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

rm -rf "$dir"
mkdir -p "$dir"
# M MiB per rank: the grid's rows of 1024 f64 cells (8 KiB) for R ranks.
job="--job heat_diffusion --checkpoint-dir $dir/ck --heat_diffusion.rows $((mib * 128 * ranks))
  --heat_diffusion.sweeps_per_epoch 1 --heat_diffusion.max_epochs 2 --heat_diffusion.tolerance 0
  --heat_diffusion.output_file $dir/heat_summary.json"
file=$dir/ck/epoch-000002.h5
# shellcheck disable=SC2086
mpirun -np "$ranks" "$epochrun" run $job --keep-last 1 >"$dir/save.log" 2>&1 ||
  { cat "$dir/save.log" >&2; exit 1; }
echo "checkpoint: $file, $(stat -c %s "$file") bytes, $ranks ranks x $mib MiB; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

load() {  # measure: prints its seconds
  if [ $cold = 1 ]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi
  case $1 in
    epochrun)
      # shellcheck disable=SC2086
      mpirun -np "$ranks" "$epochrun" run $job --resume-from-epoch 2 >"$dir/load.log" 2>&1 ||
        { cat "$dir/load.log" >&2; exit 1; }
      "$PYTHON" -c 'import json, sys
load = [r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "load"][-1]
print(max(x["load_seconds"] for x in load["ranks"]))' "$dir/ck/metrics.jsonl" ;;
    h5py | h5py_verify)
      verify=; [ "$1" = h5py_verify ] && verify=--verify
      out=$(mpirun -np "$ranks" "$PYTHON" "$here/h5py_peer_load.py" $verify "$file" 2>"$dir/peer.log") ||
        { cat "$dir/peer.log" >&2; exit 1; }
      echo "$out" | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["seconds"])' ;;
  esac
}

results=$dir/results
: >"$results"
round=0
while [ $round -lt "$rounds" ]; do
  if [ $((round % 2)) = 0 ]; then order="epochrun h5py h5py_verify"; else order="h5py_verify h5py epochrun"; fi
  line="round $round:"
  for measure in $order; do
    seconds=$(load "$measure") || exit 1
    echo "$round $measure $seconds" >>"$results"
    line="$line $measure $seconds"
  done
  echo "$line"
  round=$((round + 1))
done
"$PYTHON" - "$results" "$cold" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
t = {(int(r), m): float(s) for r, m, s in rows}
rounds = sorted({r for r, _ in t})
print(f"page cache: {'dropped before every load (cold)' if sys.argv[2] == '1' else 'warm'}; "
      f"{len(rounds)} rounds")
print(f"{'measure':<12} {'median s':>9} {'min s':>8} {'max s':>8} {'epochrun / it':>14}")
for m in ("epochrun", "h5py", "h5py_verify"):
    s = [t[r, m] for r in rounds]
    ratio = statistics.median(t[r, "epochrun"] / t[r, m] for r in rounds)
    print(f"{m:<12} {statistics.median(s):>9.4f} {min(s):>8.4f} {max(s):>8.4f} {ratio:>14.3f}")
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
