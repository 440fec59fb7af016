#!/usr/bin/env bash
# start-hosts.sh: this machine as a small cluster for multihost_tests and
# multihost_redundancy_tests (README.md beside this file):
#
#   host1..hostN  a network namespace each (eth0 $SUBNET.(10+K) on one bridge, no route out),
#                 with its own mount and UTS namespace (hostname hostK), a tmpfs /local and
#                 /dev/shm of its own, and its own GlusterFS FUSE client mounting the volume
#                 at /shared
#   storage       a network namespace ($SUBNET.2) running glusterd and the volume's one brick
#   this machine  $SUBNET.1 on the bridge; the names in a marked block of /etc/hosts
#
# Everything else (/, /tmp, /usr, /proc) is the machine's and every host's.
#
# Environment: MULTIHOST_N hosts (default 3), MULTIHOST_STATE (default /run/multihost: the
# namespace files, the records of the processes started, logs), MULTIHOST_SUBNET (default
# 10.77.7, three octets of a /24 this machine does not use), MULTIHOST_BRIDGE (default mhbr0);
# MULTIHOST_GLUSTER_OPTS ("key=value ..." for `gluster volume set` before the volume starts) and
# MULTIHOST_CLIENT_OPTS (more options of every host's glusterfs client), both empty by default:
# the volume's and clients' defaults.
#
# Up with the same settings: only says so. Up, but a host's client gone (a test killed it): that
# host gets a new one, nothing else changes. Otherwise anything left is stopped (stop-hosts.sh)
# and everything started afresh; a failed start stops what it had started. Installs
# glusterfs-server, glusterfs-client and iproute2 when missing. Root only.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL=start-hosts
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=hosts.sh
. "$HERE/hosts.sh"

N=${MULTIHOST_N:-3}
SUBNET=${MULTIHOST_SUBNET:-10.77.7}
BRIDGE=${MULTIHOST_BRIDGE:-mhbr0}
GLUSTER_OPTS=${MULTIHOST_GLUSTER_OPTS:-}
CLIENT_OPTS=${MULTIHOST_CLIENT_OPTS:-}
started_at=$SECONDS

need_root
[[ $N =~ ^[1-9][0-9]?$ ]] || die "MULTIHOST_N must be 1..99"
[[ $SUBNET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "MULTIHOST_SUBNET must be three octets, like 10.77.7"
[ ${#BRIDGE} -le 12 ] || die "MULTIHOST_BRIDGE must have at most 12 characters (its ports add up to 3)"
[[ $STATE == /?* ]] || die "MULTIHOST_STATE must be an absolute path"
# What the machine must allow; the tests check the same before they start this.
[ -c /dev/fuse ] || die "no /dev/fuse: the GlusterFS clients need FUSE"
unshare --net --mount --uts true 2>/dev/null ||
    die "cannot make network, mount and UTS namespaces here (unshare --net --mount --uts failed)"

HOSTS=()
for k in $(seq 1 "$N"); do HOSTS+=("host$k"); done
STORAGE_IP=$SUBNET.2
SETTINGS="n=$N subnet=$SUBNET bridge=$BRIDGE volume options=$GLUSTER_OPTS client options=$CLIENT_OPTS"
BRICK=/var/tmp/$(basename "$STATE")-brick
STORAGE_DIR=$STATE/$STORAGE

# --- Reuse what is up -------------------------------------------------------------------------

# Whether the harness in $STATE was started with these settings and finished starting.
started_as_asked() {
    [ -f "$STATE/.multihost" ] && [ -f "$STATE/config" ] || return 1
    grep -qxF "SETTINGS=$(printf %q "$SETTINGS")" "$STATE/config" && grep -qx 'UP=1' "$STATE/config" &&
        ip link show "$BRIDGE" >/dev/null 2>&1
}
# Whether host $1's client is the recorded one and its mount answers.
client_serves() {
    [ -n "$(recorded "$RECORDS" "glusterfs@$1")" ] && volume_answers "$1"
}
start_client() { # host
    mkdir -p "$STATE/$1"
    # shellcheck disable=SC2086
    in_host "$1" timeout -k 5 60 glusterfs --volfile-server="$STORAGE_IP" --volfile-id="$VOLUME" $CLIENT_OPTS \
        --pid-file="$STATE/$1/glusterfs.pid" --log-file="$STATE/$1/glusterfs.log" "$SHARED"
}
# The client of each host in $@ started: wait for every mount, then record the clients.
await_clients() {
    local host
    for host in "$@"; do
        wait_until 60 volume_answers "$host" ||
            die "$SHARED did not mount on $host within 60 s: $(tail -3 "$STATE/$host/glusterfs.log")"
        sed -i "/^glusterfs@$host /d" "$RECORDS"
        record "$RECORDS" "glusterfs@$host" "$(cat "$STATE/$host/glusterfs.pid")"
    done
}
summary() {
    say "up after $((SECONDS - started_at)) s: ${HOSTS[*]} ($SUBNET.11..$SUBNET.$((10 + N)) on $BRIDGE," \
        "this machine $SUBNET.1), volume $VOLUME from $STORAGE ($STORAGE_IP) at $SHARED on each," \
        "$LOCAL a tmpfs of each; run commands with $HERE/host-exec HOST COMMAND"
}

if started_as_asked; then
    if every_record_alive "$RECORDS"; then
        all_serve=1
        for host in "${HOSTS[@]}"; do client_serves "$host" || all_serve=0; done
        if [ "$all_serve" = 1 ]; then
            summary
            exit 0
        fi
    fi
    # Only clients lost (glusterd and the brick still up): new clients on those hosts.
    if [ -n "$(recorded "$RECORDS" glusterd)" ] && [ -n "$(recorded "$RECORDS" glusterfsd)" ]; then
        lost=()
        for host in "${HOSTS[@]}"; do
            client_serves "$host" && continue
            # shellcheck disable=SC2046
            end_processes 5 $(recorded "$RECORDS" "glusterfs@$host")
            # A killed client leaves a dead mount (ENOTCONN) behind.
            in_host "$host" timeout -k 2 10 umount -l "$SHARED" 2>/dev/null || true
            start_client "$host"
            lost+=("$host")
        done
        await_clients "${lost[@]}"
        say "a new client mounted $SHARED on ${lost[*]}"
        summary
        exit 0
    fi
fi
if [ -e "$STATE/.multihost" ] || grep -qF "$MARK" /etc/hosts; then
    say "a harness is left over, or up with other settings: stopping it first"
    MULTIHOST_STATE=$STATE "$HERE/stop-hosts.sh"
fi
[ ! -e "$STATE" ] || [ -z "$(ls -A "$STATE")" ] || die "$STATE exists and is not a harness's"

# --- Start from nothing -----------------------------------------------------------------------

install_missing glusterfs-server glusterfs-client iproute2
ip link show "$BRIDGE" >/dev/null 2>&1 && die "a network device $BRIDGE exists already (MULTIHOST_BRIDGE)"
if ip -4 -o addr show | awk '{ print $4 }' | grep -q "^${SUBNET//./\\.}\\." ||
    ip -4 route show | grep -q "^${SUBNET//./\\.}\\."; then
    die "this machine uses $SUBNET.0/24 already (choose another MULTIHOST_SUBNET)"
fi
for name in "$STORAGE" "${HOSTS[@]}"; do
    [ ! -e "/run/netns/$name" ] || die "a network namespace $name exists already"
done
[ ! -e "$BRICK" ] || die "$BRICK exists already"

on_exit() {
    local status=$?
    if [ "$status" -ne 0 ]; then
        say "start failed: stopping what it started"
        MULTIHOST_STATE=$STATE "$HERE/stop-hosts.sh" || true
    fi
}
trap on_exit EXIT

# What stop-hosts.sh needs to undo this is written before anything is made.
mkdir -p "$STATE/ns" "$STORAGE_DIR"/{lib,log,run/gluster,run/brick}
echo "$MARK" >"$STATE/.multihost"
created=()
for directory in "$SHARED" "$LOCAL"; do
    [ -d "$directory" ] || { mkdir -p "$directory" && created+=("$directory"); }
done
write_config() { # UP
    {
        printf 'UP=%s\n' "$1"
        printf 'SETTINGS=%q\n' "$SETTINGS"
        printf 'SUBNET=%s\nBRIDGE=%s\nBRICK=%q\n' "$SUBNET" "$BRIDGE" "$BRICK"
        printf 'HOSTS=(%s)\n' "${HOSTS[*]}"
        printf 'NETNS_MOUNT=%s\n' "$netns_mount"
        printf 'CREATED=('
        [ ${#created[@]} -eq 0 ] || printf '%q ' "${created[@]}"
        printf ')\n'
    } >"$STATE/config"
}
# `ip netns add` makes /run/netns a mount point the first time; if this start does, the stop
# undoes it.
netns_mount=0
findmnt -n --mountpoint /run/netns >/dev/null || netns_mount=1
write_config 0
printf '%s\n' "${HOSTS[@]}" >"$STATE/hosts"
: >"$RECORDS"
mkdir -p "$BRICK"

# A namespace file can be bound only onto a private mount: $STATE/ns is made one. Each new
# mount namespace unmounts its copy (and its copy of /run/netns), so that no namespace keeps
# another alive.
mount --bind "$STATE/ns" "$STATE/ns"
mount --make-private "$STATE/ns"

# keep_namespaces FILE... -- UNSHARE-ARGUMENTS...: unshare, its namespaces kept by the FILEs it
# names (--mount=FILE, --uts=FILE). The kernel binds a mount namespace's file only where that
# namespace is newer than the binder's, and run from any mount namespace but the machine's first
# (in a container, under `unshare -m`) a namespace made on one CPU can count as older than one
# made before on another: with the binder's namespace made on CPU 1, the bind of one made on
# CPU 0 failed 20 times in 20 (EINVAL), on CPU 1 never. So it is tried on each CPU in turn.
keep_namespaces() {
    local files=() cpu error file
    while [ "$1" != -- ]; do files+=("$1") && shift; done
    shift
    # shellcheck disable=SC2013 # (one CPU number a line)
    for cpu in $(awk '/^Cpus_allowed_list:/ { n = split($2, ranges, ",")
            for (i = 1; i <= n; i++) { m = split(ranges[i], r, "-")
                for (c = r[1]; c <= r[m]; c++) print c } }' /proc/self/status); do
        error=$(taskset -c "$cpu" unshare "$@" 2>&1 >/dev/null) && return 0
        # What a failed attempt bound is unbound again (each file at most once).
        for file in "${files[@]}"; do
            [ "$(stat -f -c %T "$file" 2>/dev/null)" != nsfs ] || umount "$file"
        done
        [[ $error == *"ns/mnt on "*"Invalid argument"* ]] || die "unshare $*: $error"
    done
    die "unshare $*: on every CPU: $error"
}

# --- Network: the bridge, a veth per namespace (port <bridge>pK for hostK, p0 for storage) ----
ip link add "$BRIDGE" type bridge
ip addr add "$SUBNET.1/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
add_network_namespace() { # name address port
    ip netns add "$1"
    ip link add "${BRIDGE}p$3" type veth peer name eth0 netns "$1"
    ip link set "${BRIDGE}p$3" master "$BRIDGE" up
    ip -n "$1" addr add "$2/24" dev eth0
    ip -n "$1" link set eth0 up
    ip -n "$1" link set lo up
}
add_network_namespace "$STORAGE" "$STORAGE_IP" 0
for k in $(seq 1 "$N"); do add_network_namespace "host$k" "$SUBNET.$((10 + k))" "$k"; done
# In place: /etc/hosts may be a bind mount. The names keep every lookup of a host on this
# machine (Open MPI resolves the names of --host).
{
    echo "$MARK BEGIN"
    echo "$STORAGE_IP $STORAGE"
    for k in $(seq 1 "$N"); do echo "$SUBNET.$((10 + k)) host$k"; done
    echo "$MARK END"
} >>/etc/hosts

# --- Storage: glusterd with its fixed paths (/var/lib/glusterd, /var/log/glusterfs, /run)
# bound from $STATE/storage in its own mount namespace, so that a system glusterd, if any, is
# neither seen nor disturbed; without the package's hook scripts. The brick is /run/brick
# there: `gluster volume status` breaks a longer brick name over two lines, and the tests read
# the brick's state from its line. ----------------------------------------------------------
touch "$STATE/ns/$STORAGE.mnt"
# shellcheck disable=SC2016
keep_namespaces "$STATE/ns/$STORAGE.mnt" -- --mount="$STATE/ns/$STORAGE.mnt" --propagation private sh -ec '
    umount -l "$1/ns"
    umount -l /run/netns 2>/dev/null || true
    mkdir -p /var/lib/glusterd /var/log/glusterfs
    mount --bind "$2/lib" /var/lib/glusterd
    mount --bind "$2/log" /var/log/glusterfs
    mount --bind "$2/run" /run
    mount --bind "$3" /run/brick' sh "$STATE" "$STORAGE_DIR" "$BRICK"
in_storage timeout -k 5 60 glusterd -p /run/glusterd.pid
# glusterd's first start takes seconds (it makes its UUID, looks for geo-replication tools).
wait_until 60 in_storage timeout -k 2 20 gluster --mode=script pool list >/dev/null 2>&1 ||
    die "glusterd does not answer within 60 s: $(tail -3 "$STORAGE_DIR/log/glusterd.log")"
record "$RECORDS" glusterd "$(cat "$STORAGE_DIR/run/glusterd.pid")"
# One brick on a directory of the machine's file system, which takes `force`.
in_storage timeout -k 2 60 gluster --mode=script volume create "$VOLUME" "$STORAGE_IP:/run/brick/vol" force >/dev/null
for option in $GLUSTER_OPTS; do
    in_storage timeout -k 2 60 gluster --mode=script volume set "$VOLUME" "${option%%=*}" "${option#*=}" >/dev/null ||
        die "gluster volume set $VOLUME ${option%%=*} ${option#*=} failed"
done
in_storage timeout -k 2 60 gluster --mode=script volume start "$VOLUME" >/dev/null
brick_pid() {
    local file
    for file in "$STORAGE_DIR/run/gluster/vols/$VOLUME"/*.pid; do
        [ -s "$file" ] && kill -0 "$(cat "$file")" 2>/dev/null && cat "$file" && return 0
    done
    return 1
}
wait_until 30 brick_pid >/dev/null || die "the brick did not start within 30 s (logs in $STORAGE_DIR/log/bricks)"
record "$RECORDS" glusterfsd "$(brick_pid)"

# --- Hosts: mount and UTS namespaces kept by their files, a tmpfs /local and /dev/shm each,
# and each host's own client ------------------------------------------------------------------
for host in "${HOSTS[@]}"; do
    touch "$STATE/ns/$host.mnt" "$STATE/ns/$host.uts"
    # shellcheck disable=SC2016
    keep_namespaces "$STATE/ns/$host.mnt" "$STATE/ns/$host.uts" -- \
        --mount="$STATE/ns/$host.mnt" --uts="$STATE/ns/$host.uts" --propagation private sh -ec '
        umount -l "$1/ns"
        umount -l /run/netns 2>/dev/null || true
        hostname "$2"
        mount -t tmpfs -o size=1g,mode=1777 "local-$2" "$3"
        mount -t tmpfs -o mode=1777 "shm-$2" /dev/shm' sh "$STATE" "$host" "$LOCAL"
    start_client "$host"
done
await_clients "${HOSTS[@]}"

write_config 1
trap - EXIT
summary
