#!/usr/bin/env bash
# One TCP stream across two partner sites of `orc up --netns`, on each path a packet can take:
#
#   underlay       gateway to gateway on their public addresses, no WireGuard (veth, bridge)
#   backbone       gateway to gateway over orc-backbone (orc-wg), site address to site address
#   wireguard-go   gateway to gateway over a wireguard-go tunnel on the same public addresses
#   mesh           node to node across the sites over orc-mesh, inside the backbone
#
# Each path: iperf3, one stream, RUN_SECS seconds, RUNS runs; the receiver's Mbit/s, median
# and range, and the ratio to the underlay. Needs root, iperf3, wireguard-go and wg; it
# sends traffic only inside the namespaces `orc up --netns` makes, and stops it at the end.
#
# Usage: sudo scripts/bench-mesh-throughput.sh        (ORC_BIN=path/to/orc, RUNS=5, RUN_SECS=5)
set -euo pipefail

RUNS=${RUNS:-5}
RUN_SECS=${RUN_SECS:-5}
TOOLS="iperf3 wireguard-go wg"
TOOLS_PACKAGES="iperf3, wireguard-go, wireguard-tools, python3"
# shellcheck source=scripts/lib/two-sites.sh
source "$(dirname "$0")/lib/two-sites.sh"

EAST_MESH=$(mesh_address "$EAST")
mesh_address "$WEST" >/dev/null
GW_EAST_STABLE=$(stable_of "$EAST_SITE")
GW_WEST_STABLE=$(stable_of "$WEST_SITE")
GW_EAST_SITE=$(site_address "$GW_EAST")
# The backbone carries site addresses only (a peer's allowed IPs are its site's prefix), so
# the client speaks from its own site address.
GW_WEST_SITE=$(site_address "$GW_WEST")

# wireguard-go between the two gateways' namespaces, on their public addresses.
NS_WEST=$(ns_of "$GW_WEST_STABLE")
NS_EAST=$(ns_of "$GW_EAST_STABLE")
[[ -n "$NS_WEST" && -n "$NS_EAST" ]] || { echo "the gateways' namespaces were not found" >&2; exit 1; }
KEY_W=$(wg genkey); KEY_E=$(wg genkey)
for side in W E; do
  if [[ $side == W ]]; then ns=$NS_WEST; key=$KEY_W; peer=$(echo "$KEY_E" | wg pubkey); at=$GW_EAST_STABLE; me=10.250.0.1; you=10.250.0.2
  else ns=$NS_EAST; key=$KEY_E; peer=$(echo "$KEY_W" | wg pubkey); at=$GW_WEST_STABLE; me=10.250.0.2; you=10.250.0.1; fi
  # Each its own name: both control sockets are in this host's /run/wireguard.
  dev=wgbench$side
  ip netns exec "$ns" wireguard-go "$dev" >/dev/null 2>&1
  CLEANUP_LINKS+=("$ns:$dev")
  ip netns exec "$ns" wg set "$dev" listen-port 51999 private-key <(echo "$key") \
    peer "$peer" endpoint "$at:51999" allowed-ips "$you/32"
  ip -n "$ns" addr add "$me/30" dev "$dev"
  ip -n "$ns" link set "$dev" mtu 1420 up
done

measure() { # name, client node, server node, server address [, client address]
  local name=$1 client=$2 server=$3 address=$4 bind=() results=()
  [[ -n "${5:-}" ]] && bind=(-B "$5")
  on "$server" sh -c "iperf3 -s -D -B $address -p 5301 </dev/null >/dev/null 2>&1"
  sleep 1
  for _ in $(seq "$RUNS"); do
    results+=("$(on "$client" iperf3 -c "$address" "${bind[@]}" -p 5301 -t "$RUN_SECS" -J | json 'round(d["end"]["sum_received"]["bits_per_second"]/1e6)')")
  done
  on "$server" sh -c "kill \$(ss -Hltnp 'sport = :5301' | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)" || true
  printf '%s %s\n' "$name" "${results[*]}"
}
{
  measure underlay "$GW_WEST" "$GW_EAST" "$GW_EAST_STABLE"
  measure backbone "$GW_WEST" "$GW_EAST" "$GW_EAST_SITE" "$GW_WEST_SITE"
  measure wireguard-go "$GW_WEST" "$GW_EAST" 10.250.0.2
  measure mesh "$WEST" "$EAST" "$EAST_MESH"
} >"$DATA/results"

python3 - "$DATA/results" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
runs = {r[0]: [int(x) for x in r[1:]] for r in rows}
base = statistics.median(runs["underlay"])
print(f"{'path':<14} {'Mbit/s (median)':>16} {'runs':>24} {'of underlay':>12}")
for name, values in runs.items():
    m = statistics.median(values)
    span = f"{min(values):,}–{max(values):,}"
    print(f"{name:<14} {m:>16,.0f} {span:>24} {100 * m / base:>11.1f} %")
EOF
