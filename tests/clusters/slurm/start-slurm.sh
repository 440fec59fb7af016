#!/usr/bin/env bash
# start-slurm.sh: a single-node SLURM cluster on this machine for slurm_tests (munged, slurmctld
# and slurmd on 127.0.0.1, all as root, no systemd or cgroups), with an empty queue. Installs
# Debian's SLURM and munge when missing. Everything it makes lives in $EPOCHRUN_SLURM_STATE
# (default /run/epochrun-slurm): its config, munge key and socket, spool, logs, and the records
# of the daemons it started, by which stop-slurm.sh ends exactly those. The machine's /etc/slurm
# and a system munged are never used or touched: talk to this cluster with
#     export SLURM_CONF=$EPOCHRUN_SLURM_STATE/slurm.conf
# Already up: says so and changes nothing. Half up (a daemon died): stopped and started afresh.
# A failed start stops what it had started.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL=start-slurm
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"

STATE=${EPOCHRUN_SLURM_STATE:-/run/epochrun-slurm}
CONF=$STATE/slurm.conf
RECORDS=$STATE/daemons
NODE=$(hostname -s)
CTLD_PORT=6817
SLURMD_PORT=6818
started_at=$SECONDS

need_root
[[ $STATE == /?* ]] || die "EPOCHRUN_SLURM_STATE must be an absolute path"
if every_record_alive "$RECORDS" && controller_answers "$CONF"; then
    say "already up: export SLURM_CONF=$CONF"
    exit 0
fi
if [ -e "$STATE" ]; then
    say "a previous cluster is not (fully) up: stopping it first"
    EPOCHRUN_SLURM_STATE=$STATE "$HERE/stop-slurm.sh"
fi

install_missing "${SLURM_PACKAGES[@]}"
for port in "$CTLD_PORT" "$SLURMD_PORT"; do
    ! ss -Hltn "sport = :$port" | grep -q . || die "TCP port $port is taken (another SLURM?)"
done

on_exit() {
    local status=$?
    if [ "$status" -ne 0 ]; then
        say "start failed: stopping what it started"
        EPOCHRUN_SLURM_STATE=$STATE "$HERE/stop-slurm.sh" || true
    fi
}
trap on_exit EXIT
mkdir -p "$STATE/slurmd"
chmod 0700 "$STATE/slurmd"
touch "$STATE/.epochrun-slurm"
: >"$RECORDS"
start_munged "$STATE" "$RECORDS"

memory_mb=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
{
    slurm_conf epochrun-single 127.0.0.1 "$CTLD_PORT" "$SLURMD_PORT" "$STATE"
    cat <<CONF
SlurmdSpoolDir=$STATE/slurmd
SlurmdPidFile=$STATE/slurmd.pid
SlurmdLogFile=$STATE/slurmd.log
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$(nproc) RealMemory=$memory_mb State=UNKNOWN
# Up to 4 jobs may share a CPU.
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
} >"$CONF"
start_slurmctld "$CONF" "$STATE" "$RECORDS"

timeout -k 5 30 env SLURM_CONF="$CONF" EPOCHRUN_TEST_CLUSTER="$STATE" slurmd -c -N "$NODE" -f "$CONF" ||
    die "slurmd failed: $(tail -5 "$STATE/slurmd.log" 2>/dev/null)"
pid=$(pid_file_pid "$STATE/slurmd.pid" 10) || die "slurmd did not start: $(tail -5 "$STATE/slurmd.log")"
record "$RECORDS" slurmd "$pid"
wait_until 60 nodes_idle "$CONF" 1 ||
    die "node $NODE not idle within 60 s: $(SLURM_CONF=$CONF sinfo 2>&1); $(tail -5 "$STATE/slurmd.log")"

say "up after $((SECONDS - started_at)) s: node $NODE, $(nproc) CPUs, partition debug"
echo "export SLURM_CONF=$CONF"
