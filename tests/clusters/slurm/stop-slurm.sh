#!/usr/bin/env bash
# stop-slurm.sh: undo start-slurm.sh. Cancels the cluster's jobs, ends the daemons it recorded
# (by PID and start time: never a process by its name) and any slurmstepd of this cluster, then
# deletes $EPOCHRUN_SLURM_STATE. Does nothing when nothing is up; safe after a failed start.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL=stop-slurm
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"

STATE=${EPOCHRUN_SLURM_STATE:-/run/epochrun-slurm}
need_root
if [ ! -e "$STATE/.epochrun-slurm" ]; then
    say "nothing to stop (no cluster in $STATE)"
    exit 0
fi
stop_slurm "$STATE/slurm.conf" "$STATE" "$STATE/daemons"
rm -rf --one-file-system "$STATE"
say "stopped"
