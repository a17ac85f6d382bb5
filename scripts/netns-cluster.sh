#!/usr/bin/env bash
# A multi-host test bed on one Linux machine: N network namespaces (hosts h1..hN)
# on a bridge, each with its own address and a tc bandwidth (and optional delay)
# limit on its interface, and an Open MPI launch agent that starts processes in
# them, so that `mpirun --host h1,h2 ...` runs ranks that talk over real,
# rate-limited TCP. Needs root, iproute2 (ip, tc) and util-linux (unshare).
#
#   scripts/netns-cluster.sh up 2 --rate 1gbit          # hosts h1, h2 (10.77.0.1, .2)
#   mpirun $(scripts/netns-cluster.sh mpirun-args) --host h1,h2 -np 2 weft train --tp 2
#   scripts/netns-cluster.sh down
#
# Run `scripts/netns-cluster.sh help` for every command and option.
set -euo pipefail

PROG=netns-cluster
NAME=${WEFT_NETNS_NAME:-weft}
SUBNET=${WEFT_NETNS_SUBNET:-}
STATE_ROOT=${WEFT_NETNS_STATE:-/run/weft-netns}

usage() {
  cat <<'EOF'
usage: scripts/netns-cluster.sh [--name NAME] [--subnet A.B.C] COMMAND [ARGS]

A test bed of N hosts (network namespaces NAME-h1..NAME-hN, host names h1..hN)
on a Linux bridge NAME-br, host hK at A.B.C.K/24, this machine at A.B.C.254.

commands:
  up N [--rate R] [--delay D] [--mtu M]
                 create (or update: idempotent) the bed with N hosts. --rate is
                 each host's egress bandwidth (tc tbf), e.g. 100mbit, 1gbit,
                 10gbit, or 'unlimited' (default: 1gbit); --delay adds a one-way
                 delay per host (tc netem), e.g. 0.1ms (default: none); --mtu
                 sets the interfaces' MTU (default: 1500)
  down           remove everything `up` created (namespaces, bridge, files)
  status         the hosts, their addresses and tc settings
  exec HOST CMD...
                 run CMD in HOST (h1, 10.77.0.1 or NAME-h1)
  hostfile       print the path of an Open MPI hostfile listing the hosts
  mpirun-args    print the mpirun options that launch ranks on the bed:
                   mpirun $(scripts/netns-cluster.sh mpirun-args) --host h1,h2 -np 2 CMD
  agent [OPTS] HOST CMD...
                 the launch agent Open MPI calls (plm_rsh_agent); mpirun-args
                 names a copy of it in the bed's state directory
  help           this text

options (before the command; also WEFT_NETNS_NAME, WEFT_NETNS_SUBNET):
  --name NAME    the bed's name, 1-8 lowercase letters/digits (default: weft);
                 several beds can coexist under different names and subnets
  --subnet A.B.C the /24 the bed uses (default: 10.77.0 for 'weft', else
                 10.78.0, which --subnet must change for a third bed)
EOF
}

die() {
  echo "$PROG: error: $*" >&2
  exit 2
}

note() { echo "$PROG: $*"; }

# --- the state directory (written by up, read by everything else) ----------

state_dir() { echo "$STATE_ROOT/$NAME"; }
ns_of() { echo "$NAME-h$1"; }     # host index -> namespace
veth_of() { echo "$NAME-h$1"; }   # host index -> host-side veth (<= 15 chars)
bridge() { echo "$NAME-br"; }

default_subnet() {
  if [ "$NAME" = weft ]; then echo 10.77.0; else echo 10.78.0; fi
}

load_state() {
  local cfg
  cfg="$(state_dir)/config"
  local named=""
  [ "$NAME" = weft ] || named=" --name $NAME"
  [ -f "$cfg" ] || die "no test bed '$NAME' is up (no $cfg): run scripts/netns-cluster.sh$named up N first"
  # shellcheck disable=SC1090
  . "$cfg"
}

# --- checks: each failure says what to do -----------------------------------

need_root() {
  [ "$(id -u)" -eq 0 ] ||
    die "needs root (network namespaces, bridges and tc need CAP_SYS_ADMIN and CAP_NET_ADMIN): run it with sudo"
}

need_tools() {
  command -v ip >/dev/null 2>&1 ||
    die "ip not available: install iproute2 (scripts/install-deps.sh installs it, or apt-get install iproute2)"
  command -v tc >/dev/null 2>&1 ||
    die "tc not available: install iproute2 (scripts/install-deps.sh installs it, or apt-get install iproute2)"
  command -v unshare >/dev/null 2>&1 ||
    die "unshare not available: install util-linux (apt-get install util-linux)"
  ip netns list >/dev/null 2>&1 ||
    die "ip netns not available: install a full iproute2 (apt-get install iproute2; busybox ip has no netns)"
}

# --- rates ------------------------------------------------------------------

# Bits per second of a tc rate (100mbit, 1gbit, 2.5gbit, 125mbps, 10Gbit ...).
rate_bps() {
  local r=${1,,}
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)([kmgt]?)(bit|bps)$ ]] ||
    die "--rate '$1' is not a rate: write e.g. 100mbit, 1gbit, 10gbit or unlimited"
  local n=${BASH_REMATCH[1]} p=${BASH_REMATCH[3]} u=${BASH_REMATCH[4]}
  awk -v n="$n" -v p="$p" -v u="$u" 'BEGIN {
    m = 1; if (p == "k") m = 1e3; else if (p == "m") m = 1e6; else if (p == "g") m = 1e9; else if (p == "t") m = 1e12
    if (u == "bps") m *= 8
    printf "%.0f\n", n * m }'
}

check_delay() {
  [[ ${1,,} =~ ^[0-9]+(\.[0-9]+)?(s|ms|us|usec|msec)$ ]] ||
    die "--delay '$1' is not a time: write e.g. 0.1ms, 50us or 1ms"
}

# tc on host K: a tbf for the rate (burst and queue sized from the rate so that
# 64 KiB GSO packets pass and TCP keeps the link busy), under a netem for the
# delay when one is asked for.
apply_tc() {
  local k=$1 ns dev=eth0 bps burst limit parent="root"
  ns=$(ns_of "$k")
  ip netns exec "$ns" tc qdisc del dev "$dev" root >/dev/null 2>&1 || true
  if [ -n "$DELAY" ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$DELAY" limit 100000 2>/dev/null ||
      die "tc netem is not available in this kernel (CONFIG_NET_SCH_NETEM): modprobe sch_netem, or leave out --delay"
    parent="parent 1:"
  fi
  if [ "$RATE" != unlimited ]; then
    bps=$(rate_bps "$RATE")
    # burst: 4 ms of traffic, at least 256 KiB; queue: 20 ms, at least 4 MiB.
    burst=$(awk -v b="$bps" 'BEGIN { x = b / 8 * 0.004; if (x < 262144) x = 262144; printf "%.0f\n", x }')
    limit=$(awk -v b="$bps" 'BEGIN { x = b / 8 * 0.020; if (x < 4194304) x = 4194304; printf "%.0f\n", x }')
    # shellcheck disable=SC2086
    ip netns exec "$ns" tc qdisc add dev "$dev" $parent handle 10: tbf rate "$RATE" burst "$burst" limit "$limit" 2>/dev/null ||
      die "tc tbf is not available in this kernel (CONFIG_NET_SCH_TBF): modprobe sch_tbf, or pass --rate unlimited"
  fi
}

# --- the launch agent ---------------------------------------------------------

# The agent Open MPI calls as `agent [ssh-style options] HOST command words...`:
# it runs the words as one shell command line (as ssh does) in HOST's network
# namespace, with its own UTS namespace whose host name is HOST's, so that each
# orted reports a host of its own (and keeps its own session directory).
write_agent() {
  local f
  f="$(state_dir)/agent"
  cat >"$f.tmp" <<EOF
#!/usr/bin/env bash
# Open MPI launch agent of the netns test bed '$NAME' (written by netns-cluster.sh up).
set -euo pipefail
hosts=$(printf '%q' "$(state_dir)/hosts")
# Skip ssh-style options; those that take a value skip it too.
while [ \$# -gt 0 ]; do
  case "\$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 || true ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ \$# -ge 2 ] || { echo "netns-cluster agent: usage: agent [options] HOST COMMAND..." >&2; exit 255; }
host=\${1#*@}
shift
entry=\$(awk -v h="\$host" '\$1 == h || \$2 == h || \$3 == h { print \$1, \$3; exit }' "\$hosts" 2>/dev/null || true)
if [ -z "\$entry" ]; then
  echo "netns-cluster agent: unknown host '\$host' in bed '$NAME' (hosts: \$(awk '{ printf "%s%s", sep, \$1; sep=", " }' "\$hosts" 2>/dev/null)); is the bed up? scripts/netns-cluster.sh status" >&2
  exit 255
fi
name=\${entry% *}
ns=\${entry#* }
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$1" && exec sh -c "\$2"' agent "\$name" "\$*"
EOF
  chmod 755 "$f.tmp"
  mv "$f.tmp" "$f"
}

cmd_agent() {
  load_state
  exec "$(state_dir)/agent" "$@"
}

# --- up / down / status -------------------------------------------------------

host_ip() { echo "$SUBNET.$1"; }

# Reachability without ping: a TCP connect to a closed port is refused at once
# when the path works and times out when something drops the packets. A few
# tries: a link that has just come up may not answer ARP yet. The last error
# is left in REACH_ERR.
REACH_ERR=""
reachable() {
  local ns=$1 ip=$2 try
  for try in 1 2 3 4 5; do
    REACH_ERR=$(timeout 2 ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/$ip/9" 2>&1) && return 0
    [[ $REACH_ERR == *refused* ]] && return 0
    [ -n "$REACH_ERR" ] || REACH_ERR="no answer within 2 s"
    sleep "0.$try"
  done
  REACH_ERR=${REACH_ERR##*: }
  return 1
}

cmd_up() {
  local n="" rate=1gbit delay="" mtu=1500
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) [ $# -ge 2 ] || die "--rate needs a value (e.g. 1gbit or unlimited)"; rate=$2; shift 2 ;;
      --rate=*) rate=${1#*=}; shift ;;
      --delay) [ $# -ge 2 ] || die "--delay needs a value (e.g. 0.1ms)"; delay=$2; shift 2 ;;
      --delay=*) delay=${1#*=}; shift ;;
      --mtu) [ $# -ge 2 ] || die "--mtu needs a value (e.g. 9000)"; mtu=$2; shift 2 ;;
      --mtu=*) mtu=${1#*=}; shift ;;
      -*) die "unknown option '$1' of up: see scripts/netns-cluster.sh help" ;;
      *) [ -z "$n" ] || die "up takes one host count, got '$n' and '$1'"; n=$1; shift ;;
    esac
  done
  if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 64 ]; then
    die "up needs a host count from 1 to 64: scripts/netns-cluster.sh up 2 [--rate 1gbit]"
  fi
  case "${rate,,}" in
    0 | none | unlimited | off) rate=unlimited ;;
    *) rate_bps "$rate" >/dev/null ;;
  esac
  case "${delay,,}" in
    "" | 0 | none | off) delay="" ;;
    *) check_delay "$delay" ;;
  esac
  if ! [[ $mtu =~ ^[0-9]+$ ]] || [ "$mtu" -lt 576 ] || [ "$mtu" -gt 65535 ]; then
    die "--mtu must be 576..65535, got '$mtu'"
  fi
  need_root
  need_tools

  local sd br old_n=0
  sd=$(state_dir)
  br=$(bridge)
  if [ -f "$sd/config" ]; then
    # shellcheck disable=SC1091
    old_n=$(. "$sd/config" && echo "$N")
  fi
  [ -n "$SUBNET" ] || SUBNET=$(default_subnet)
  [[ $SUBNET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "--subnet must be the first three octets of a /24, e.g. 10.77.0"
  # The subnet must not be in use on another interface of this machine.
  local clash
  clash=$(ip -o -4 addr show | awk -v s="$SUBNET." -v br="$br" 'index($4, s) == 1 && $2 != br { print $2; exit }')
  [ -z "$clash" ] || die "subnet $SUBNET.0/24 is already used by interface $clash: pass another --subnet (e.g. --subnet 10.79.0)"

  mkdir -p "$sd"
  N=$n RATE=$rate DELAY=$delay
  # The bridge, with this machine's address on it (mpirun's daemon listens there).
  if ! ip link show "$br" >/dev/null 2>&1; then
    ip link add "$br" type bridge 2>/dev/null ||
      die "cannot create bridge $br: the kernel needs bridge support (CONFIG_BRIDGE; modprobe bridge)"
  fi
  ip link set "$br" mtu "$mtu" up
  ip addr replace "$SUBNET.254/24" dev "$br"
  # The qdiscs, tried on the bridge first: a kernel without them fails here,
  # before any host's settings change.
  if [ -n "$DELAY" ]; then
    tc qdisc replace dev "$br" root netem delay "$DELAY" >/dev/null 2>&1 ||
      die "tc netem is not available in this kernel (CONFIG_NET_SCH_NETEM): modprobe sch_netem, or leave out --delay"
  fi
  if [ "$RATE" != unlimited ]; then
    tc qdisc replace dev "$br" root tbf rate "$RATE" burst 262144 limit 4194304 >/dev/null 2>&1 ||
      die "tc tbf is not available in this kernel (CONFIG_NET_SCH_TBF): modprobe sch_tbf, or pass --rate unlimited"
  fi
  tc qdisc del dev "$br" root >/dev/null 2>&1 || true

  local k ns veth
  for ((k = 1; k <= n; k++)); do
    ns=$(ns_of "$k")
    veth=$(veth_of "$k")
    if ! ip netns list | awk '{ print $1 }' | grep -qx "$ns"; then
      ip netns add "$ns" 2>/dev/null ||
        die "cannot create network namespace $ns (ip netns add failed): run on a host or a privileged container (CAP_SYS_ADMIN)"
    fi
    if ! ip link show "$veth" >/dev/null 2>&1; then
      ip link add "$veth" type veth peer name eth0 netns "$ns" ||
        die "cannot create the veth pair $veth <-> $ns:eth0: the kernel needs veth support (CONFIG_VETH; modprobe veth)"
    fi
    ip link set "$veth" master "$br" mtu "$mtu" up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 mtu "$mtu" up
    ip -n "$ns" addr replace "$(host_ip "$k")/24" dev eth0
    apply_tc "$k"
  done
  # Hosts beyond N from an earlier, larger `up` go.
  for ((k = n + 1; k <= old_n; k++)); do
    ip netns del "$(ns_of "$k")" 2>/dev/null || true
    rm -rf "/etc/netns/$(ns_of "$k")"
  done

  # Forget the neighbours of hosts that were removed or recreated (a stale
  # entry sends to the old interface's address until it expires).
  ip neigh flush dev "$br" >/dev/null 2>&1 || true
  for ((k = 1; k <= n; k++)); do
    ip -n "$(ns_of "$k")" neigh flush dev eth0 >/dev/null 2>&1 || true
  done

  # Name resolution: the hosts file, the hostfile, and /etc/hosts inside each
  # namespace (ip netns exec mounts /etc/netns/NS/hosts over /etc/hosts).
  : >"$sd/hosts.tmp"
  : >"$sd/hostfile.tmp"
  for ((k = 1; k <= n; k++)); do
    echo "h$k $(host_ip "$k") $(ns_of "$k")" >>"$sd/hosts.tmp"
    echo "h$k slots=1" >>"$sd/hostfile.tmp"
  done
  mv "$sd/hosts.tmp" "$sd/hosts"
  mv "$sd/hostfile.tmp" "$sd/hostfile"
  for ((k = 1; k <= n; k++)); do
    mkdir -p "/etc/netns/$(ns_of "$k")"
    {
      echo "127.0.0.1 localhost"
      echo "::1 localhost ip6-localhost ip6-loopback"
      echo "$SUBNET.254 $(hostname)"
      awk '{ print $2, $1 }' "$sd/hosts"
    } >"/etc/netns/$(ns_of "$k")/hosts"
  done
  cat >"$sd/config" <<EOF
N=$n
RATE=$rate
DELAY=$delay
MTU=$mtu
SUBNET=$SUBNET
EOF
  write_agent

  # Every host reaches every other and this machine.
  for ((k = 1; k <= n; k++)); do
    local j
    for ((j = 1; j <= n; j++)); do
      [ "$j" -ne "$k" ] || continue
      reachable "$(ns_of "$k")" "$(host_ip "$j")" ||
        die "h$k cannot reach h$j ($(host_ip "$j"): $REACH_ERR): bridged traffic is filtered here; try sysctl -w net.bridge.bridge-nf-call-iptables=0 or iptables -I FORWARD -i $br -o $br -j ACCEPT, then up again"
    done
    reachable "$(ns_of "$k")" "$SUBNET.254" ||
      die "h$k cannot reach this machine ($SUBNET.254: $REACH_ERR): check the firewall (iptables -I INPUT -i $br -j ACCEPT), then up again"
  done
  note "bed '$NAME' up: $n hosts h1..h$n at $SUBNET.1..$SUBNET.$n, rate ${rate}${delay:+, delay $delay}, mtu $mtu"
  local named=""
  [ "$NAME" = weft ] || named=" --name $NAME"
  note "run: mpirun \$($0$named mpirun-args) --host $(seq -s, -f 'h%g' 1 "$((n < 2 ? n : 2))") -np $((n < 2 ? n : 2)) CMD"
}

cmd_down() {
  need_root
  need_tools
  local removed=0 ns sd
  sd=$(state_dir)
  # Every NAME-hK namespace, whether or not the state directory still lists it.
  for ns in $(ip netns list | awk -v p="$NAME-h" 'index($1, p) == 1 && substr($1, length(p) + 1) ~ /^[0-9]+$/ { print $1 }'); do
    ip netns del "$ns" && removed=$((removed + 1))
    rm -rf "/etc/netns/$ns"
  done
  if ip link show "$(bridge)" >/dev/null 2>&1; then
    ip link del "$(bridge)" && removed=$((removed + 1))
  fi
  rm -rf "$sd"
  rmdir "$STATE_ROOT" 2>/dev/null || true
  rmdir /etc/netns 2>/dev/null || true
  if [ "$removed" -eq 0 ]; then
    note "bed '$NAME': nothing to remove"
  else
    note "bed '$NAME' removed"
  fi
}

cmd_status() {
  need_tools
  load_state
  note "bed '$NAME': $N hosts, rate $RATE${DELAY:+, delay $DELAY}, mtu $MTU, this machine $SUBNET.254 on $(bridge)"
  local name ip ns state qd
  while read -r name ip ns; do
    if ip netns list | awk '{ print $1 }' | grep -qx "$ns"; then
      state=up
      qd=$(ip netns exec "$ns" tc qdisc show dev eth0 2>/dev/null | tr '\n' ';' | sed 's/;$//')
    else
      state="MISSING (run up again)"
      qd=""
    fi
    printf '  %-4s %-15s %-12s %s  %s\n' "$name" "$ip" "$ns" "$state" "$qd"
  done <"$(state_dir)/hosts"
  note "agent: $(state_dir)/agent  hostfile: $(state_dir)/hostfile"
}

# HOST (h1, its IP or its namespace) -> "name namespace".
resolve_host() {
  local e
  e=$(awk -v h="$1" '$1 == h || $2 == h || $3 == h { print $1, $3; exit }' "$(state_dir)/hosts")
  [ -n "$e" ] || die "unknown host '$1' in bed '$NAME': hosts are $(awk '{ printf "%s%s", sep, $1; sep=", " }' "$(state_dir)/hosts")"
  echo "$e"
}

cmd_exec() {
  [ $# -ge 2 ] || die "exec needs a host and a command: scripts/netns-cluster.sh exec h1 ip addr"
  need_root
  load_state
  local e
  e=$(resolve_host "$1")
  shift
  # shellcheck disable=SC2016 # $0 and $@ belong to the inner sh
  exec ip netns exec "${e#* }" unshare --uts sh -c 'hostname "$0" && exec "$@"' "${e% *}" "$@"
}

cmd_hostfile() {
  load_state
  echo "$(state_dir)/hostfile"
}

cmd_mpirun_args() {
  load_state
  # pml ob1 + btl tcp,self: ranks talk over the bed's TCP only (no shared
  # memory, no UCX, which would bypass the namespaces); no tree spawn: mpirun
  # starts every daemon itself through the agent; --bind-to none: every "host"
  # believes it owns the machine's cores and would bind its first rank to core
  # 0 -- all ranks on one core, each message waiting a scheduler tick (5 ms).
  echo "--mca plm_rsh_agent $(state_dir)/agent --mca plm_rsh_no_tree_spawn 1 --bind-to none" \
    "--mca pml ob1 --mca btl tcp,self" \
    "--mca btl_tcp_if_include $SUBNET.0/24 --mca oob_tcp_if_include $SUBNET.0/24"
}

# --- main -----------------------------------------------------------------------

while [ $# -gt 0 ]; do
  case "$1" in
    --name) [ $# -ge 2 ] || die "--name needs a value"; NAME=$2; shift 2 ;;
    --name=*) NAME=${1#*=}; shift ;;
    --subnet) [ $# -ge 2 ] || die "--subnet needs a value (e.g. 10.77.0)"; SUBNET=$2; shift 2 ;;
    --subnet=*) SUBNET=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option '$1': see scripts/netns-cluster.sh help" ;;
    *) break ;;
  esac
done
[[ $NAME =~ ^[a-z0-9]{1,8}$ ]] || die "--name must be 1-8 lowercase letters or digits, got '$NAME'"
[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1
shift
case "$cmd" in
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  exec) cmd_exec "$@" ;;
  hostfile) cmd_hostfile "$@" ;;
  mpirun-args) cmd_mpirun_args "$@" ;;
  agent) cmd_agent "$@" ;;
  help) usage ;;
  *) die "unknown command '$cmd': see scripts/netns-cluster.sh help" ;;
esac
