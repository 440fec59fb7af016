#!/bin/bash
# The floor of a synchronous save into one shared file on this machine, without epochrun.
# Usage: scripts/one_file_floor.sh DIR ROUNDS (root: it drops the page cache).
# Three writers of 256 MiB each: into three files or into one file (disjoint ranges), buffered
# (conv=fsync) or direct (oflag=direct + fsync). Prints seconds per configuration per round.
dir=${1:?usage: one_file_floor.sh DIR [ROUNDS]}
rounds=${2:-5}
mkdir -p "$dir"
run() { # mode files
  rm -f "$dir"/f*
  sync
  echo 3 >/proc/sys/vm/drop_caches
  local flags="conv=fsync"
  [ "$1" = direct ] && flags="oflag=direct conv=fsync,notrunc"
  [ "$1" = buffered ] && flags="conv=fsync,notrunc"
  local start
  start=$(date +%s.%N)
  for i in 0 1 2; do
    if [ "$2" = three ]; then of=$dir/f$i; seek=0; else of=$dir/f; seek=$((256 * i)); fi
    # $flags holds one or two operands: split on purpose.
    # shellcheck disable=SC2086
    dd if=/dev/zero of="$of" bs=1M count=256 seek=$seek $flags status=none &
  done
  wait
  echo "$(date +%s.%N) - $start" | bc
}
for r in $(seq "$rounds"); do
  for cfg in "buffered three" "direct three" "direct one" "buffered one"; do
    # shellcheck disable=SC2086
    echo "round $r $cfg $(run $cfg)"
  done
done
