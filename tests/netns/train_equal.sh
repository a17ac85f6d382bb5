#!/usr/bin/env bash
# The TP=2 tiny training run across two "hosts" of the netns test bed
# (scripts/netns-cluster.sh: two network namespaces, rate-limited TCP, ranks
# started by mpirun through the bed's launch agent) gives the losses of the same
# run on the local backend (ranks as threads), step by step.
#
#   train_equal.sh WEFT MPIRUN CLUSTER_SCRIPT WORKDIR
#
# Where the machine cannot host the bed (not root, no network namespaces, no
# bridge/veth/tbf, no mpirun: CI containers) it prints "SKIP: <why>" and exits
# 77, which ctest reports as skipped. The bed is torn down even on failure.
set -euo pipefail

weft=$1 mpirun=$2 cluster=$3 dir=$4
name=wefttest subnet=10.78.0 steps=5

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}

# --- what the machine must allow ----------------------------------------------
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces (run ctest as root)"
if ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
  skip "ip/tc not installed (iproute2: scripts/install-deps.sh installs it)"
fi
command -v unshare >/dev/null 2>&1 || skip "unshare not installed (util-linux)"
if [ -z "$mpirun" ] || ! command -v "$mpirun" >/dev/null 2>&1; then
  skip "mpirun not found (Open MPI: scripts/install-deps.sh installs it)"
fi
"$mpirun" --version 2>/dev/null | grep -Eq "Open MPI|OpenRTE" || skip "$mpirun is not Open MPI (the bed's launch agent is Open MPI's plm_rsh_agent)"

probe=wnprobe$$
probe_cleanup() {
  ip netns del "$probe" >/dev/null 2>&1 || true
  ip link del "${probe}b" >/dev/null 2>&1 || true
}
trap probe_cleanup EXIT
ip netns add "$probe" >/dev/null 2>&1 || skip "cannot create network namespaces here (ip netns add failed: an unprivileged container?)"
ip netns exec "$probe" unshare --uts true >/dev/null 2>&1 || skip "cannot create UTS namespaces here (unshare --uts failed)"
ip link add "${probe}b" type bridge >/dev/null 2>&1 || skip "the kernel has no bridge support (CONFIG_BRIDGE)"
ip link add "${probe}v" type veth peer name eth0 netns "$probe" >/dev/null 2>&1 || skip "the kernel has no veth support (CONFIG_VETH)"
ip netns exec "$probe" tc qdisc add dev eth0 root tbf rate 1gbit burst 256k limit 4m >/dev/null 2>&1 ||
  skip "the kernel has no tbf qdisc (CONFIG_NET_SCH_TBF)"
probe_cleanup
trap - EXIT

# --- one bed at a time on this machine (other build trees run this test too) ---
mkdir -p /run/lock
exec 9>/run/lock/weft-netns-test.lock
flock -w 120 9 || fail "another netns test held /run/lock/weft-netns-test.lock for 120 s"

bed() { "$cluster" --name "$name" --subnet "$subnet" "$@"; }
trap 'bed down >/dev/null 2>&1 || echo "WARNING: $cluster --name $name down failed"' EXIT
bed down >/dev/null # a bed a killed run left behind
bed up 2 --rate 1gbit

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$dir"
cd "$dir"
rm -f local.jsonl mpi.jsonl
read -ra mpi_args <<<"$(bed mpirun-args)"

# The ranks really run on h1 and h2, in their namespaces.
# shellcheck disable=SC2016 # expanded by the ranks' shells
where=$("$mpirun" "${mpi_args[@]}" --host h1,h2 -np 2 sh -c 'echo "$(hostname) $(ip -4 -o addr show eth0 | awk "{print \$4}")"' | sort | tr '\n' ' ')
echo "ranks on: $where"
[ "$where" = "h1 $subnet.1/24 h2 $subnet.2/24 " ] || fail "mpirun did not start one rank in each namespace: $where"

run=(train --preset tiny --tp 2 --steps "$steps" --micro-batch 2 --eval-every 0 --eval-batches 1
  --log-every 1 --sample-tokens 0)
echo "local: weft ${run[*]} --backend local"
WEFT_NUM_THREADS=1 "$weft" "${run[@]}" --backend local --metrics local.jsonl || fail "the local run failed"
echo "mpi:   mpirun ${mpi_args[*]} --host h1,h2 -np 2 weft ${run[*]}"
out=$("$mpirun" "${mpi_args[@]}" --host h1,h2 -np 2 -x WEFT_NUM_THREADS=1 "$weft" "${run[@]}" --metrics mpi.jsonl 2>&1) ||
  fail "the mpirun job failed: $out"
echo "$out"
grep -q "ranks 2 on the mpi backend" <<<"$out" || fail "the mpirun job did not run on the mpi backend"

# Step by step: equal within 1e-5 relative.
losses() { sed -n 's/.*"step":\([0-9]*\),"loss":\([-0-9.e+]*\).*/\1 \2/p' "$1"; }
paste <(losses local.jsonl) <(losses mpi.jsonl) | awk -v want="$steps" '
  { n++
    d = $2 - $4; if (d < 0) d = -d
    a = $2 < 0 ? -$2 : $2
    rel = a > 0 ? d / a : d
    tag = (d == 0) ? "exact" : sprintf("rel %.2e", rel)
    printf "step %d: local %s  netns %s  %s\n", $1, $2, $4, tag
    if ($1 != $3 || rel > 1e-5) bad++
    if (d == 0) exact++ }
  END {
    if (n != want) { printf "FAIL: %d steps compared, expected %d\n", n, want; exit 1 }
    if (bad) { printf "FAIL: %d of %d steps differ by more than 1e-5 relative\n", bad, n; exit 1 }
    printf "netns TP=2 losses equal the local ones: %d steps, %d exactly\n", n, exact }'
