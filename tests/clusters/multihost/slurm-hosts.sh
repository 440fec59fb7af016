#!/usr/bin/env bash
# slurm-hosts.sh start|stop: a SLURM cluster of the hosts of start-hosts.sh, for the multi-node
# SLURM cases of multihost_tests: munged and slurmctld on this machine ($SUBNET.1, ports
# 6917/6918, beside a single-node cluster's 6817/6818), one slurmd per host started through
# host-exec (node hostK at the host's address), one partition `hosts`. Everything it makes lives
# in $MULTIHOST_STATE/slurm; talk to it with
#     export SLURM_CONF=$MULTIHOST_STATE/slurm/slurm.conf
# `start` changes nothing while the cluster is up; `stop` ends exactly the daemons it recorded
# (stop-hosts.sh runs it too). Installs SLURM and munge when missing. Root only.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL=slurm-hosts
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=hosts.sh
. "$HERE/hosts.sh"
DIR=$STATE/slurm
CONF=$DIR/slurm.conf
DAEMONS=$DIR/daemons

stop() {
    [ -d "$DIR" ] || { say "nothing to stop"; return 0; }
    stop_slurm "$CONF" "$DIR" "$DAEMONS"
    rm -rf --one-file-system "$DIR"
    say "stopped"
}

stop_after_failure() {
    local status=$?
    [ "$status" -eq 0 ] && return
    say "start failed: stopping what it started"
    stop
}

start() {
    local started_at=$SECONDS host pid k=0 memory_mb
    grep -qx 'UP=1' "$STATE/config" 2>/dev/null || die "the hosts are not up: run start-hosts.sh first"
    mapfile -t HOSTS <"$STATE/hosts"
    SUBNET=$(sed -n 's/^SUBNET=//p' "$STATE/config")
    if every_record_alive "$DAEMONS" && controller_answers "$CONF"; then
        say "already up: export SLURM_CONF=$CONF"
        return 0
    fi
    [ ! -d "$DIR" ] || stop
    install_missing "${SLURM_PACKAGES[@]}"
    trap stop_after_failure EXIT
    mkdir -p "$DIR"
    : >"$DAEMONS"
    start_munged "$DIR" "$DAEMONS"
    memory_mb=$(awk -v n="${#HOSTS[@]}" '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 / n }' /proc/meminfo)
    {
        slurm_conf epochrun-hosts "$SUBNET.1" 6917 6918 "$DIR"
        # %n: the hosts share this machine's file system, so each slurmd needs files of its own.
        echo "SlurmdSpoolDir=$DIR/slurmd.%n"
        echo "SlurmdPidFile=$DIR/slurmd.%n.pid"
        echo "SlurmdLogFile=$DIR/slurmd.%n.log"
        # /tmp is every host's: the PMIx plugin's directories, named by job and step, would
        # collide there across the hosts of one step. /local is each host's own.
        echo "TmpFS=$LOCAL"
        for host in "${HOSTS[@]}"; do
            k=$((k + 1))
            echo "NodeName=$host NodeAddr=$SUBNET.$((10 + k)) NodeHostname=$host CPUs=$(nproc) RealMemory=$memory_mb State=UNKNOWN"
        done
        echo "PartitionName=hosts Nodes=$(IFS=,; echo "${HOSTS[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
    } >"$CONF"
    start_slurmctld "$CONF" "$DIR" "$DAEMONS"
    for host in "${HOSTS[@]}"; do
        timeout -k 5 30 "$HERE/host-exec" "$host" \
            "SLURM_CONF=$CONF EPOCHRUN_TEST_CLUSTER=$DIR slurmd -c -N $host -f $CONF" ||
            die "slurmd on $host failed: $(tail -5 "$DIR/slurmd.$host.log" 2>/dev/null)"
        pid=$(pid_file_pid "$DIR/slurmd.$host.pid" 10) || die "slurmd on $host did not start"
        record "$DAEMONS" "slurmd@$host" "$pid"
    done
    wait_until 60 nodes_idle "$CONF" "${#HOSTS[@]}" ||
        die "the nodes are not all idle within 60 s: $(SLURM_CONF=$CONF sinfo 2>&1)"
    trap - EXIT
    say "up after $((SECONDS - started_at)) s: ${HOSTS[*]} in partition hosts"
    echo "export SLURM_CONF=$CONF"
}

need_root
case ${1:-} in
start) start ;;
stop) stop ;;
*)
    echo "usage: slurm-hosts.sh start|stop" >&2
    exit 2
    ;;
esac
