#!/usr/bin/env bash
# stop-hosts.sh: undo start-hosts.sh, also a start that failed half-way: the hosts' SLURM
# cluster (slurm-hosts.sh) if up, whatever still runs on the hosts (found by its namespaces,
# never by its name), the FUSE clients, the brick and glusterd (by their records), the
# namespaces, the bridge and its ports, the /etc/hosts block, the brick's data, the state
# directory, and the mount points it made. Does nothing when nothing is up. Reads what to undo
# from $MULTIHOST_STATE/config; MULTIHOST_STATE is its only setting.
set -uo pipefail
# Finishes even when its reader goes away (`| head`).
trap '' PIPE
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL=stop-hosts
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=hosts.sh
. "$HERE/hosts.sh"
started_at=$SECONDS

need_root
remove_hosts_block() {
    grep -qF "$MARK" /etc/hosts || return 0
    local kept
    kept=$(awk -v mark="$MARK" '$0 == mark " BEGIN" { skip = 1; next }
        $0 == mark " END" { skip = 0; next } !skip' /etc/hosts)
    printf '%s\n' "$kept" >/etc/hosts
}
if [ ! -f "$STATE/.multihost" ]; then
    remove_hosts_block
    say "nothing to stop (no harness in $STATE)"
    exit 0
fi
HOSTS=() BRIDGE=mhbr0 BRICK='' CREATED=() NETNS_MOUNT=0
# shellcheck disable=SC1091
[ -f "$STATE/config" ] && . "$STATE/config"

# The PIDs whose network or mount namespace is one of the namespace files given: one `find`
# over /proc compares the namespaces' inode numbers.
namespace_pids() {
    local inodes=() file
    for file in "$@"; do
        [ "$(stat -f -c %T "$file" 2>/dev/null)" = nsfs ] && inodes+=("$(stat -L -c %i "$file")")
    done
    [ ${#inodes[@]} -gt 0 ] || return 0
    find /proc/[0-9]*/ns/net /proc/[0-9]*/ns/mnt -maxdepth 0 -printf '%p %l\n' 2>/dev/null |
        awk -v inodes="${inodes[*]}" -v self=$$ '
            BEGIN { n = split(inodes, list, " "); for (i = 1; i <= n; i++) wanted[list[i]] = 1 }
            { split($1, path, "/"); inode = $2; gsub(/[^0-9]/, "", inode)
              if ((inode in wanted) && path[3] != self && !(path[3] in seen)) { seen[path[3]] = 1; print path[3] } }'
}

if [ -d "$STATE/slurm" ]; then
    MULTIHOST_STATE=$STATE "$HERE/slurm-hosts.sh" stop
fi

# A stopped client would keep what waits on it blocked: it is continued first. Then whatever
# else runs on the hosts (jobs, Open MPI daemons, shells), then the clients, each of which
# unmounts its volume as it ends.
clients=$(recorded "$RECORDS" 'glusterfs@*' | tr '\n' ' ')
# shellcheck disable=SC2086
[ -z "${clients// /}" ] || kill -CONT $clients 2>/dev/null
for host in "${HOSTS[@]}"; do
    others=()
    for pid in $(namespace_pids "/run/netns/$host" "$STATE/ns/$host.mnt"); do
        [[ " $clients " == *" $pid "* ]] || others+=("$pid")
    done
    if [ ${#others[@]} -gt 0 ]; then
        say "$host: ending what still runs there: $(for pid in "${others[@]}"; do
            printf '%s(%s) ' "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null)"
        done)"
        end_processes 5 "${others[@]}"
    fi
done
# shellcheck disable=SC2086
end_processes 5 $clients
# A killed client's mount is left dead; detached without a lookup, which would block.
for host in "${HOSTS[@]}"; do
    [ -e "$STATE/ns/$host.mnt" ] || continue
    if nsenter --mount="$STATE/ns/$host.mnt" findmnt -n --mountpoint "$SHARED" >/dev/null 2>&1; then
        nsenter --mount="$STATE/ns/$host.mnt" timeout -k 2 10 umount -l -c "$SHARED"
    fi
done

# The brick, glusterd, and anything glusterd started that is still there.
# shellcheck disable=SC2046
end_processes 5 $(recorded "$RECORDS" glusterfsd)
# shellcheck disable=SC2046
end_processes 5 $(recorded "$RECORDS" glusterd)
# shellcheck disable=SC2046
end_processes 5 $(namespace_pids "/run/netns/$STORAGE" "$STATE/ns/$STORAGE.mnt")

# The namespaces (a mount namespace goes with its file once nothing runs in it), the bridge and
# its ports (deleted by name: a network namespace something still holds would keep its veth).
for file in "$STATE"/ns/*.mnt "$STATE"/ns/*.uts; do
    [ -e "$file" ] && umount "$file" 2>/dev/null
done
for name in "$STORAGE" "${HOSTS[@]}"; do
    [ -e "/run/netns/$name" ] && ip netns del "$name"
done
for port in $(seq 0 "${#HOSTS[@]}"); do
    ip link show "${BRIDGE}p$port" >/dev/null 2>&1 && ip link del "${BRIDGE}p$port"
done
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
if [ "$NETNS_MOUNT" = 1 ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
    umount /run/netns 2>/dev/null
fi
remove_hosts_block

findmnt -n --mountpoint "$STATE/ns" >/dev/null 2>&1 && umount -l "$STATE/ns"
if findmnt -rn -o TARGET | grep -q "^$STATE/"; then
    say "ERROR: still mounted under $STATE (left in place): $(findmnt -rn -o TARGET | grep "^$STATE/" | tr '\n' ' ')"
    exit 1
fi
[ -n "$BRICK" ] && [ -d "$BRICK" ] && rm -rf --one-file-system "$BRICK"
rm -rf --one-file-system "$STATE"
for directory in "${CREATED[@]}"; do
    rmdir "$directory" 2>/dev/null
done
say "stopped after $((SECONDS - started_at)) s"
exit 0
