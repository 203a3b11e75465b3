#!/usr/bin/env bash
# How fast a mesh change travels over real WireGuard, on `orc up --netns` (real agents on
# nodes at a Hetzner site and a Vultr site, behind their site gateways).
#
# Each round, a workstation on the emulated internet (the echo host's namespace, a
# wireguard-go interface made once) joins project sys/sys: from the start of
# `orc mesh connect` until both nodes answer a ping at their mesh addresses (the zone has
# given both agents the new peer, they applied it, and the workstation's handshake went
# through each site's gateway); then from the start of `orc mesh disconnect` until neither
# answers any more (the time the first unanswered round of pings was sent). ROUNDS rounds
# (default 10); p50, p90 and max of each. A ping waits 200 ms at most, so a figure is late by
# at most the pings of one round that went unanswered. Needs root, wireguard-go, wg, wg-quick
# and ping; all traffic stays inside the namespaces `orc up --netns` makes.
#
# Usage: sudo scripts/bench-mesh-propagation.sh        (ORC_BIN=path/to/orc, ROUNDS=10)
set -euo pipefail

ROUNDS=${ROUNDS:-10}
TOOLS="wireguard-go wg wg-quick ping"
TOOLS_PACKAGES="wireguard-go, wireguard-tools, iputils-ping, python3"
# shellcheck source=scripts/lib/two-sites.sh
source "$(dirname "$0")/lib/two-sites.sh"

WEST_MESH=$(mesh_address "$WEST")
EAST_MESH=$(mesh_address "$EAST")
DEV=orc-probe
ip netns exec "$ECHO_NS" wireguard-go "$DEV" >/dev/null 2>&1
CLEANUP_LINKS+=("$ECHO_NS:$DEV")
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
answers() { ip netns exec "$ECHO_NS" ping -c 1 -W 0.2 "$1" >/dev/null 2>&1; }

echo "round  connect→both answer  disconnect→neither answers" >&2
for round in $(seq "$ROUNDS"); do
  name=probe$round
  file=$DATA/$name.conf
  t0=$(now_ms)
  orc mesh connect sys/sys --name "$name" --output "$file" >/dev/null 2>"$DATA/cli.err" \
    || { cat "$DATA/cli.err" >&2; exit 1; }
  wg-quick strip "$file" >"$DATA/$name.wg"
  ip netns exec "$ECHO_NS" wg setconf "$DEV" "$DATA/$name.wg"
  address=$(sed -n 's/^Address = //p' "$file")
  ip -n "$ECHO_NS" addr flush dev "$DEV"
  ip -n "$ECHO_NS" addr add "$address" dev "$DEV"
  ip -n "$ECHO_NS" link set "$DEV" mtu 1340 up
  pending=("$WEST_MESH" "$EAST_MESH")
  until (( ${#pending[@]} == 0 )); do
    left=()
    for target in "${pending[@]}"; do answers "$target" || left+=("$target"); done
    pending=("${left[@]}")
    (( $(now_ms) - t0 < 60000 )) || { echo "round $round: no answer within a minute" >&2; exit 1; }
  done
  connected=$(( $(now_ms) - t0 ))
  t1=$(now_ms)
  orc mesh disconnect sys/sys --name "$name" >/dev/null 2>"$DATA/cli.err" \
    || { cat "$DATA/cli.err" >&2; exit 1; }
  while :; do
    sent=$(now_ms)
    answers "$WEST_MESH" || answers "$EAST_MESH" || break
    (( sent - t1 < 60000 )) || { echo "round $round: still answered a minute later" >&2; exit 1; }
  done
  disconnected=$(( sent - t1 ))
  printf '%5d  %19d  %26d\n' "$round" "$connected" "$disconnected" >&2
  echo "$connected $disconnected" >>"$DATA/results"
done

python3 - "$DATA/results" <<'PY'
import statistics, sys
rows = [tuple(map(int, line.split())) for line in open(sys.argv[1])]
def line(name, values):
    values = sorted(values)
    p90 = values[min(len(values) - 1, round(0.9 * (len(values) - 1)))]
    print(f"{name:<30} p50 {statistics.median(values):>6.0f} ms   p90 {p90:>6} ms   max {values[-1]:>6} ms")
line("connect → both sites answer", [r[0] for r in rows])
line("disconnect → neither answers", [r[1] for r in rows])
PY
