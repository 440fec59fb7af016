#!/usr/bin/env bash
# check-hosts.sh: whether the hosts of start-hosts.sh behave as separate hosts: each answers with
# its own name and address, sees only its own /local and every host's files on /shared, and
# Open MPI starts one rank on each through host-exec over the bridge. For a look by hand before
# the tests (or after one failed); exits non-zero at the first check that fails.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL=check-hosts
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=hosts.sh
. "$HERE/hosts.sh"
[ -s "$STATE/hosts" ] || die "the hosts are not up (no $STATE/hosts): run start-hosts.sh"
mapfile -t HOSTS <"$STATE/hosts"
SUBNET=$(sed -n 's/^SUBNET=//p' "$STATE/config")
on() { timeout -k 5 60 "$HERE/host-exec" "$@"; }

for host in "${HOSTS[@]}"; do on "$host" "touch $LOCAL/check-$host $SHARED/.check-$host"; done
for host in "${HOSTS[@]}"; do
    seen=$(on "$host" "echo \$(hostname) \$(hostname -I) local: \$(ls $LOCAL | grep '^check-') shared: \$(ls -A $SHARED | grep -c '^.check-')")
    say "$seen"
    [[ $seen == "$host $SUBNET."* ]] || die "$host answers with another name or address"
    [[ $seen == *"local: check-$host shared: ${#HOSTS[@]}" ]] ||
        die "$host sees another host's $LOCAL, or not every host's file on $SHARED"
done
for host in "${HOSTS[@]}"; do on "$host" "rm -f $LOCAL/check-$host $SHARED/.check-$host"; done

hosts=$(IFS=,; echo "${HOSTS[*]}")
# shellcheck disable=SC2016 # (the ranks' shell expands it)
ranks=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 120 \
    mpirun --mca plm_rsh_agent "$HERE/host-exec" --mca plm_rsh_no_tree_spawn 1 \
    --host "$hosts" -np "${#HOSTS[@]}" --mca btl tcp,self \
    --mca oob_tcp_if_include "$SUBNET.0/24" --mca btl_tcp_if_include "$SUBNET.0/24" \
    sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)"' | sort)
say "mpirun: $(echo "$ranks" | tr '\n' ';')"
[ "$(echo "$ranks" | awk '{ print $4 }' | sort -u | wc -l)" -eq "${#HOSTS[@]}" ] ||
    die "the ranks did not start one on each host"
say "all checks passed"
