#!/usr/bin/env bash
#
# The directory lock's race across hosts, on the hosts of tests/clusters/multihost (README
# there; HARNESS is that directory), with real runs of heat_diffusion. Run by multihost_tests;
# by hand:
#
#   EPOCHRUN=build/epochrun tests/lock_race_across_hosts.sh tests/clusters/multihost DIR
#   (the hosts up: tests/clusters/multihost/start-hosts.sh; DIR on /shared)
#
# A (host1) holds DIR/.epochrun.lock the way an older epochrun did and, at the end, unlinks it
# while holding it, then closes it. B, a real run with rank 0 on host2, opens the lock file while
# A holds it; strace delays B's flock() by 5 s so that A's unlink and release fall between
# B's open() and B's flock(). B then holds the directory at the start of its epoch 4
# (EPOCHRUN_FAULT epoch@4:WAIT) until C has been tried: C must meet B running, however long C
# takes to start on a loaded machine (in a CI run, C started after B had ended, and rightly ran).
# (The watcher that releases A must see B's open descriptor within
# that delay, or B's flock finds A's lock and B is refused: with 0.5 s, a watcher starved of the
# 2 cores by the three hosts' start-up missed it in one CI run of twenty-odd, and with 2 s in
# another, B's ranks on host1 and host3 polling MPI meanwhile; so the delay is 5 s and the
# watcher runs at a higher priority than the runs.) C, a real run with rank 0 on host3, then starts on the same DIR
# while B runs. Right: B takes the directory and ends 0, C is refused with exit 3. Prints
# "B exit N" and "C exit N".
set -euo pipefail
HERE=${1:?usage: lock_race_across_hosts.sh HARNESS DIR}
STATE=${MULTIHOST_STATE:-/run/multihost}
E=${EPOCHRUN:?set EPOCHRUN to the epochrun binary (reachable from every host)}
D=${2:?usage: lock_race_across_hosts.sh HARNESS DIR}
SUBNET=$(sed -n 's/^SUBNET=//p' "$STATE/config")
SYNC=$(mktemp -d /tmp/lock-race.XXXXXX)
trap '[ -n "${KEEP_SYNC:-}" ] || rm -rf "$SYNC"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun3() { # HOSTLIST CMD...  (bounded by $LIMIT seconds, 120 unless set)
    local hosts=$1; shift
    timeout -k 5 "${LIMIT:-120}" mpirun --mca plm_rsh_agent "$HERE/host-exec" --mca plm_rsh_no_tree_spawn 1 \
        --host "$hosts" -np 3 --mca btl tcp,self --mca oob_tcp_if_include "$SUBNET.0/24" \
        --mca btl_tcp_if_include "$SUBNET.0/24" "$@"
}
JOB=(run --job heat_diffusion --heat_diffusion.rows 1536 --heat_diffusion.columns 512
    --heat_diffusion.tolerance 0 --heat_diffusion.output_file "" --checkpoint-dir "$D")

"$HERE/host-exec" host1 "rm -rf $D; mkdir -p $D"
# A: epochrun's protocol (flock, write the holder, ... unlink while holding, close)
"$HERE/host-exec" host1 "timeout -k 5 60 python3 -c '
import os, fcntl, time
fd = os.open(\"$D/.epochrun.lock\", os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.pwrite(fd, b\"pid %d on host1 (A)\" % os.getpid(), 0)
open(\"$SYNC/locked\", \"w\").close()
while not os.path.exists(\"$SYNC/release\"): time.sleep(0.002)
os.unlink(\"$D/.epochrun.lock\"); os.close(fd)
print(\"A: unlinked and released\")'" &
while [ ! -e "$SYNC/locked" ]; do sleep 0.05; done

# B: rank 0 on host2, every flock() delayed by 5 s
EPOCHRUN_FAULT=epoch@4:WAIT EPOCHRUN_FAULT_RELEASE="$SYNC/b-go" LIMIT=240 \
    mpirun3 host2,host3,host1 -x EPOCHRUN_FAULT -x EPOCHRUN_FAULT_RELEASE strace -f -qq -o /dev/null -e trace=flock -e inject=flock:delay_enter=5s \
    "$E" "${JOB[@]}" --heat_diffusion.max_epochs 20 >"$SYNC/B.log" 2>&1 &
bpid=$!
# Release A as soon as B's rank 0 has the lock file open.
watched=0
timeout -k 5 60 nice -n -10 python3 - "$D" "$SYNC/release" <<'PY' || watched=$?
import os, sys, time
d, release = sys.argv[1], sys.argv[2]
ino = os.stat("/run/netns/host2").st_ino
def is_b(p):  # B's rank 0: the epochrun process in host2's network namespace
    try:
        return os.stat(f"/proc/{p}/ns/net").st_ino == ino and open(f"/proc/{p}/comm").read().strip() == "epochrun"
    except OSError:
        return False
# Every epochrun in host2's namespace is watched, looked up again every 0.2 s: one of an earlier
# case may still be ending there when B's rank 0 starts.
pids, scanned, end = [], 0.0, time.time() + 50
while time.time() < end:
    if time.time() - scanned > 0.2:
        pids = [p for p in os.listdir("/proc") if p.isdigit() and is_b(p)]
        scanned = time.time()
    for pid in pids:
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{f}") == d + "/.epochrun.lock" for f in os.listdir(f"/proc/{pid}/fd")):
                open(release, "w").close()
                sys.exit(0)
        except OSError:
            pass  # gone, or a descriptor closed while listed
    time.sleep(0.002)
sys.exit(f"B never opened the lock file (epochrun processes in host2's namespace at the end: {pids})")
PY
if [ "$watched" -ne 0 ]; then
    # What B said: refused (it locked before A let go), or never started.
    touch "$SYNC/release" "$SYNC/b-go"
    kill "$bpid" 2>/dev/null || true
    wait || true
    echo "--- B's output:"; tail -20 "$SYNC/B.log" || true
    exit "$watched"
fi
wait %1
for _ in $(seq 1 900); do grep -qE 'epoch 3 done|error' "$SYNC/B.log" && break; sleep 0.1; done
echo "--- B (rank 0 on host2):"
grep -E 'error|epoch 3 done' "$SYNC/B.log" | head -3 || true
echo "--- C (rank 0 on host3), same directory, while B runs:"
rc=0
mpirun3 host3,host1,host2 "$E" "${JOB[@]}" --heat_diffusion.max_epochs 60 --num-epochs 5 >"$SYNC/C.log" 2>&1 || rc=$?
grep -E 'error|removed|finished' "$SYNC/C.log" | head -3 || true
echo "C exit $rc"
touch "$SYNC/b-go"
rc=0
wait $bpid || rc=$?
grep -E 'failed' "$SYNC/B.log" | head -3 || true
echo "B exit $rc"
