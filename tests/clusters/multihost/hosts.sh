# shellcheck shell=bash
# Sourced by the multihost scripts after ../lib.sh: the names and paths they share, and how to
# run a command in a host's or the storage's namespaces.
# shellcheck disable=SC2034 # (the variables are the sourcing scripts')

STATE=${MULTIHOST_STATE:-/run/multihost}
RECORDS=$STATE/pids
STORAGE=storage
VOLUME=mhvol
SHARED=/shared
LOCAL=/local
# Marks this harness's block of /etc/hosts.
MARK="# epochrun test hosts (tests/clusters/multihost)"

in_host() { # host command...
    local host=$1
    shift
    nsenter --net="/run/netns/$host" --mount="$STATE/ns/$host.mnt" --uts="$STATE/ns/$host.uts" -- "$@"
}
in_storage() { nsenter --net="/run/netns/$STORAGE" --mount="$STATE/ns/$STORAGE.mnt" -- "$@"; }

# Whether the volume is mounted on host $1 and answers (bounded: a hung client blocks a stat,
# and only SIGKILL ends it).
volume_answers() {
    in_host "$1" findmnt -n -o FSTYPE --mountpoint "$SHARED" 2>/dev/null | grep -qx fuse.glusterfs &&
        in_host "$1" timeout -k 1 5 stat -f "$SHARED" >/dev/null 2>&1
}
