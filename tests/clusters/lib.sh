# shellcheck shell=bash
# Sourced by the scripts of tests/clusters: logging, packages, bounded waits, and the records of
# the processes a script started ("name pid starttime" lines), by which its stop script ends
# exactly those and nothing else. Set TOOL before sourcing (the name in every log line). Every
# command that could wait (a daemon's start, a client of one) runs under `timeout`, so that a
# hang fails the start instead of holding the test until its own limit.

TOOL=${TOOL:-$(basename "$0")}

say() { printf '[%s %(%H:%M:%S)T] %s\n' "$TOOL" -1 "$*"; }
die() {
    printf '[%s %(%H:%M:%S)T] ERROR: %s\n' "$TOOL" -1 "$*" >&2
    exit 1
}
need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root (it starts daemons, namespaces and mounts)"; }

# install_missing PACKAGE...: apt-get install of those not installed. A fresh machine may have
# no package lists yet, so a failed install is retried after apt-get update. Bounded: the dpkg
# lock is waited for at most 5 minutes (another installer may be running), each apt-get call at
# most 15.
install_missing() {
    local missing=() package attempt
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' ||
            missing+=("$package")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    say "installing ${missing[*]}"
    local apt=(timeout -k 10 900 apt-get -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends)
    for attempt in 1 2 3; do
        if DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >/dev/null; then
            say "installed ${missing[*]}"
            return 0
        fi
        say "apt-get install failed (attempt $attempt): apt-get update, then again"
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >/dev/null || true
    done
    die "could not install ${missing[*]}"
}

# wait_until SECONDS COMMAND...: COMMAND until it succeeds, every 0.1 s, for at most SECONDS.
wait_until() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

# A PID is taken for a recorded process only while its start time (field 22 of /proc/PID/stat,
# in clock ticks since boot) is the recorded one: a PID reused by another process never is.
start_time() { awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null; }
# Gone, or a zombie its parent has not reaped yet: either way it has ended.
has_ended() {
    local state
    state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 0
    [ -z "$state" ] || [ "$state" = Z ]
}
# record FILE NAME PID
record() { echo "$2 $3 $(start_time "$3")" >>"$1"; }
# recorded FILE PATTERN: the PIDs of the records whose name matches the shell PATTERN and whose
# process is still the recorded one, and running (a killed daemon may stay a zombie for a while:
# its parent, often PID 1, reaps it when it gets to it).
recorded() {
    [ -f "$1" ] || return 0
    local name pid started
    while read -r name pid started; do
        # shellcheck disable=SC2254
        case $name in
        $2) [ "$(start_time "$pid")" = "$started" ] && ! has_ended "$pid" && echo "$pid" ;;
        esac
    done <"$1"
    return 0
}
# every_record_alive FILE: whether every recorded process still runs (false without records).
every_record_alive() {
    [ -s "$1" ] || return 1
    local name pid started
    while read -r name pid started; do
        [ "$(start_time "$pid")" = "$started" ] || return 1
        ! has_ended "$pid" || return 1
    done <"$1"
}
# pid_file_pid FILE SECONDS: the PID a daemon wrote to FILE once that process runs.
pid_file_pid() {
    wait_until "$2" pid_file_alive "$1" || return 1
    cat "$1"
}
pid_file_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# end_processes GRACE PID...: SIGTERM, SIGKILL to those still there after GRACE seconds, then
# wait up to 5 s more for them to go (a process in an uninterruptible wait cannot go sooner).
end_processes() {
    local grace=$1 pid
    shift
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null
    wait_until "$grace" all_ended "$@" && return 0
    say "still running after SIGTERM and ${grace} s, sending SIGKILL: $*"
    kill -KILL "$@" 2>/dev/null
    wait_until 5 all_ended "$@" || say "WARNING: not ended even by SIGKILL: $*"
}
all_ended() {
    local pid
    for pid in "$@"; do has_ended "$pid" || return 1; done
}

# --- SLURM: what the single-node cluster and the hosts' cluster share --------------------------

# shellcheck disable=SC2034 # (the sourcing scripts')
SLURM_PACKAGES=(slurmctld slurmd slurm-client munge)

# start_munged DIRECTORY RECORDS: a munged of its own (key, socket, pid, log in DIRECTORY), never
# the system's. munged refuses a socket whose directory others cannot search, and a key in a
# directory others can write.
start_munged() {
    local dir=$1 records=$2 pid
    mkdir -p "$dir/munge"
    chmod 0755 "$dir"
    chmod 0700 "$dir/munge"
    timeout -k 5 30 mungekey --create --force --keyfile="$dir/munge/munge.key"
    chmod 0600 "$dir/munge/munge.key"
    timeout -k 5 30 munged --socket="$dir/munge.socket" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" \
        --seed-file="$dir/munge/munged.seed" || die "munged failed: $(tail -3 "$dir/munged.log")"
    pid=$(pid_file_pid "$dir/munged.pid" 10) || die "munged did not start: $(tail -3 "$dir/munged.log")"
    record "$records" munged "$pid"
    timeout 10 munge -n --socket="$dir/munge.socket" |
        timeout 10 unmunge --socket="$dir/munge.socket" >/dev/null ||
        die "munged does not answer on $dir/munge.socket"
}

# slurm_conf NAME CONTROLLER_ADDRESS CTLD_PORT SLURMD_PORT DIRECTORY: the settings both clusters
# share, on stdout; the caller adds its spool directory, nodes and partition.
slurm_conf() {
    local name=$1 address=$2 ctld_port=$3 slurmd_port=$4 dir=$5
    cat <<EOF
# Written by tests/clusters ($TOOL) at each start: a private cluster for epochrun's tests.
ClusterName=$name
SlurmctldHost=$(hostname -s)($address)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
# Everything as root: no slurm user, no ownership to set up.
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/ctld
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/slurmctld.log
# Neither systemd nor cgroups: job processes are tracked through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
# A backfill pass every 5 s, not 30: the queue holds a job or two.
SchedulerParameters=bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# srun's default: Debian's Open MPI has PMIx, not PMI-2.
MpiDefault=pmix
MailProg=/bin/true
JobRequeue=1
# SIGTERM to SIGKILL at a time limit or scancel: 10 s (docs/PREEMPTION.md is measured with it).
KillWait=10
# Ended jobs stay visible to scontrol for 5 minutes: the tests read their final state.
MinJobAge=300
ReturnToService=2
# The CPUs and memory below are believed even where the hardware differs.
SlurmdParameters=config_overrides
EOF
}

# start_slurmctld CONF DIRECTORY RECORDS: slurmctld with an empty queue (-c), answering pings.
start_slurmctld() {
    local conf=$1 dir=$2 records=$3 pid
    mkdir -p "$dir/ctld"
    chmod 0700 "$dir/ctld"
    timeout -k 5 30 env SLURM_CONF="$conf" EPOCHRUN_TEST_CLUSTER="$dir" slurmctld -c -f "$conf" ||
        die "slurmctld failed: $(tail -5 "$dir/slurmctld.log" 2>/dev/null)"
    pid=$(pid_file_pid "$dir/slurmctld.pid" 10) ||
        die "slurmctld did not start: $(tail -5 "$dir/slurmctld.log" 2>/dev/null)"
    record "$records" slurmctld "$pid"
    wait_until 20 controller_answers "$conf" ||
        die "slurmctld does not answer: $(tail -5 "$dir/slurmctld.log" 2>/dev/null)"
}

controller_answers() { SLURM_CONF=$1 timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; }

# nodes_idle CONF COUNT: whether all COUNT nodes are idle.
nodes_idle() { [ "$(SLURM_CONF=$1 timeout 10 sinfo -h -o '%T %D' 2>/dev/null)" = "idle $2" ]; }

queue_empty() { [ -z "$(SLURM_CONF=$1 timeout 10 squeue -h -o %A 2>/dev/null)" ]; }

# stop_slurm CONF DIRECTORY RECORDS: cancel what is queued (only this cluster's: its own
# controller), end the recorded daemons, compute nodes first, then any slurmstepd of this
# cluster (marked by EPOCHRUN_TEST_CLUSTER in the daemons' environment, which it inherits).
stop_slurm() {
    local conf=$1 dir=$2 records=$3 jobs pid
    if [ -n "$(recorded "$records" slurmctld)" ]; then
        jobs=$(SLURM_CONF=$conf timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
        if [ -n "${jobs// /}" ]; then
            say "cancelling jobs $jobs"
            # shellcheck disable=SC2086
            SLURM_CONF=$conf timeout 10 scancel $jobs 2>/dev/null
            # KillWait (10 s) plus a margin.
            wait_until 20 queue_empty "$conf" || say "jobs still queued after 20 s: $jobs"
        fi
    fi
    # shellcheck disable=SC2046
    end_processes 10 $(recorded "$records" 'slurmd*')
    # shellcheck disable=SC2046
    end_processes 10 $(recorded "$records" slurmctld)
    local steps=() entry comm
    for entry in /proc/[0-9]*; do
        read -r comm 2>/dev/null <"$entry/comm" || continue
        [ "$comm" = slurmstepd ] || continue
        tr '\0' '\n' <"$entry/environ" 2>/dev/null | grep -qxF "EPOCHRUN_TEST_CLUSTER=$dir" &&
            steps+=("${entry#/proc/}")
    done
    end_processes 5 "${steps[@]}"
    # shellcheck disable=SC2046
    end_processes 5 $(recorded "$records" munged)
}
