# shellcheck shell=bash
# Sourced by the mesh benches: starts `orc up --netns` in a temporary data directory, creates
# pool sys/sys/west at a partner site in eu-central (Hetzner) and sys/sys/east at one in
# us-east (Vultr), and waits until both nodes and both site gateways are ready. Everything it
# starts is stopped, and every interface listed in CLEANUP_LINKS ("namespace:device") is
# deleted, when the sourcing script exits.
#
# Before sourcing, set TOOLS to the commands the script needs besides orc. After it:
#   WEST EAST GW_WEST GW_EAST  node ids;  WEST_SITE EAST_SITE  site names
#   FABRIC  the prefix of the servers' namespaces;  ECHO_NS  the emulated internet host's
#   DATA  a scratch directory, removed at exit
# and the helpers below (orc, json, on, mesh_address, stable_of, site_address, ns_of).

ORC_BIN=${ORC_BIN:-}
if [[ -z "$ORC_BIN" ]]; then
  for candidate in target/release/orc target/debug/orc; do
    [[ -x "$candidate" ]] && ORC_BIN=$candidate && break
  done
fi
[[ -n "$ORC_BIN" && -x "$ORC_BIN" ]] || { echo "no orc binary: build it (cargo build -p orc-cli) or set ORC_BIN" >&2; exit 1; }
for tool in python3 ${TOOLS:-}; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (Debian: ${TOOLS_PACKAGES:-python3})" >&2; exit 1; }
done
[[ $EUID -eq 0 ]] || { echo "orc up --netns needs root" >&2; exit 1; }

DATA=$(mktemp -d)
export ORC_DATA_DIR=$DATA/data
unset ORC_URL ORC_TOKEN
"$ORC_BIN" up --netns --data-dir "$ORC_DATA_DIR" --http 127.0.0.1:0 --grpc 127.0.0.1:0 \
  --hetzner-emu 127.0.0.1:0 --vultr-emu 127.0.0.1:0 --robot-emu 127.0.0.1:0 >"$DATA/up.log" 2>&1 &
UP=$!
CLEANUP_LINKS=()
CLEANUP_PIDS=()
cleanup() {
  for pid in "${CLEANUP_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for entry in "${CLEANUP_LINKS[@]}"; do ip -n "${entry%%:*}" link del "${entry#*:}" 2>/dev/null || true; done
  kill -INT "$UP" 2>/dev/null || true
  for _ in $(seq 120); do kill -0 "$UP" 2>/dev/null || break; sleep 0.5; done
  kill -KILL "$UP" 2>/dev/null || true
  rm -rf "$DATA"
}
trap cleanup EXIT

for _ in $(seq 600); do
  grep -q "^Ctrl-C stops everything" "$DATA/up.log" && break
  kill -0 "$UP" 2>/dev/null || { cat "$DATA/up.log" >&2; exit 1; }
  sleep 0.5
done
FABRIC=$(sed -n 's/.*servers are namespaces \([^ ]*\)\*.*/\1/p' "$DATA/up.log" | head -1)
[[ -n "$FABRIC" ]] || { echo "orc up printed no namespace prefix" >&2; exit 1; }
ECHO_NS=${FABRIC}echo

orc() { "$ORC_BIN" "$@"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

echo "creating a pool at a Hetzner site and one at a Vultr site" >&2
for pool in west:eu-central east:us-east; do
  orc pool create "sys/sys/${pool%%:*}" --provider partner --class "${pool#*:}" --cpu 2 --mem 4 \
    --os ubuntu-24.04 --size 1 --wait >/dev/null
done
ready() { orc --json nodes "$1" | json 'all(n["agent"] and n["agent"]["state"]=="ready" for n in d) and len(d)>0'; }
node_of() { orc --json nodes "$1" | json 'd[0]["id"]'; }
for _ in $(seq 300); do
  [[ $(ready sys/sys/west) == True && $(ready sys/sys/east) == True ]] && break
  sleep 1
done
site_of() { orc --json nodes "$1" | json 'd[0]["site"]'; }
WEST_SITE=$(site_of sys/sys/west)
EAST_SITE=$(site_of sys/sys/east)
for site in "$WEST_SITE" "$EAST_SITE"; do
  for _ in $(seq 300); do [[ $(ready "sys/sys/gw-partner-$site") == True ]] && break; sleep 1; done
done
WEST=$(node_of sys/sys/west)
EAST=$(node_of sys/sys/east)
GW_WEST=$(node_of "sys/sys/gw-partner-$WEST_SITE")
GW_EAST=$(node_of "sys/sys/gw-partner-$EAST_SITE")
export WEST EAST GW_WEST GW_EAST WEST_SITE EAST_SITE ECHO_NS

on() { local node=$1; shift; orc exec "$node" --project sys/sys --timeout 2m -- "$@"; }
mesh_address() {
  for _ in $(seq 120); do
    local a
    a=$(on "$1" ip -4 -o addr show orc-mesh | awk '{print $4}' | cut -d/ -f1)
    [[ -n "$a" ]] && echo "$a" && return
    sleep 0.5
  done
  echo "$1 has no mesh address" >&2; exit 1
}
stable_of() { orc --json sites | json "[s['public_ipv4'] for s in d if s['site']=='$1'][0]"; }
site_address() { on "$1" ip -4 -o addr show | awk '$2 != "lo" && $2 != "eth0" && $2 !~ /^(orc-|wgbench)/ {print $4}' | head -1 | cut -d/ -f1; }
# The namespace whose eth0 holds address $1.
ns_of() {
  for ns in $(ip netns list | awk '{print $1}'); do
    ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | grep -q " $1/" && echo "$ns" && return
  done
}
