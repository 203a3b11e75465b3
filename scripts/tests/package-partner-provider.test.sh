#!/usr/bin/env bash
# Tests of scripts/package-partner-provider.sh.
#
# Most tests run a copy of the script in a scratch checkout with stand-in tools on a PATH of
# their own (cargo, cargo-zigbuild, rustup, rustc, zig, orc: each records how it was called),
# a scratch HOME, and a scratch app manifest, so they check its logic in well under a second
# each. The CLI downloads come from an HTTPS server on 127.0.0.1 with a throwaway CA. One test,
# real_build_amd64, runs the real script in this checkout with the real cargo zigbuild for
# linux/amd64 and checks the binary it stages (x86-64 ELF, glibc symbols no newer than
# 2.28). Everything is made under one temporary directory, removed at exit.
#
# Usage: bash scripts/tests/package-partner-provider.test.sh [TEST...]
#   (every test when none is named; CARGO_TARGET_DIR is where the real build puts its output)
# Needs: bash, coreutils, curl, python3, openssl, binutils (readelf, objdump), shellcheck,
# and for real_build_amd64 the Rust toolchain, cargo-zigbuild and zig.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SCRIPT=$REPO/scripts/package-partner-provider.sh
REAL_HOME=$HOME
REAL_PATH=$PATH
# The real build keeps its cargo and rustup homes when HOME is a scratch one.
export CARGO_HOME=${CARGO_HOME:-$REAL_HOME/.cargo}
export RUSTUP_HOME=${RUSTUP_HOME:-$REAL_HOME/.rustup}
TOKEN='s3cret-registry-token-do-not-print'

TMP=$(mktemp -d)
SERVER_PID=
cleanup() {
  local status=$?
  if [[ -n $SERVER_PID ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
  exit "$status"
}
trap cleanup EXIT

case $(uname -m) in
  x86_64) HOST_ARCH=amd64 ;;
  aarch64) HOST_ARCH=arm64 ;;
  *) echo "unsupported host architecture $(uname -m)" >&2; exit 1 ;;
esac

# --- fixtures -----------------------------------------------------------------------------

# The system commands the script may use, linked one by one into a directory: a stand-in
# PATH then holds exactly the tools a test gives it, whatever else this machine has.
SYSBIN=$TMP/sysbin
mkdir -p "$SYSBIN"
for tool in bash env cat cp mv rm mkdir mktemp chmod install dirname basename uname cut \
  sha256sum awk grep sed tr head tail sort curl python3; do
  path=$(PATH=$REAL_PATH command -v "$tool") || { echo "$tool is missing" >&2; exit 1; }
  ln -s "$path" "$SYSBIN/$tool"
done
# The interpreter itself, not a version manager's shim that needs the real HOME.
ln -sf "$(python3 -c 'import sys; print(sys.executable)')" "$SYSBIN/python3"

# A scratch checkout: the script and, unless a test removes it, the app manifest.
FAKE_REPO=$TMP/repo
mkdir -p "$FAKE_REPO/scripts" "$FAKE_REPO/crates/partner-provider"
cp "$SCRIPT" "$FAKE_REPO/scripts/"
printf '{"name": "orc-prov-partner", "stand_in": true}\n' >"$FAKE_REPO/crates/partner-provider/orc-app.json"

stub() { # path; the body on stdin: an executable bash script
  mkdir -p "$(dirname "$1")"
  { printf '#!/usr/bin/env bash\nset -euo pipefail\n'; cat; } >"$1"
  chmod +x "$1"
}

# cargo: records its argv; `cargo zigbuild … --target T.G` records which zig is first on the
# PATH and which zig cargo-zigbuild is told to use, and writes a stand-in binary where cargo
# would.
STUBS=$TMP/stubs
stub "$STUBS/cargo" <<'STUB'
printf "cargo %s\n" "$*" >>"$LOG"
[[ ${1:-} == zigbuild ]] || exit 0
target=
while (($#)); do [[ $1 == --target ]] && target=$2; shift; done
printf "zig %s %s\n" "$(command -v zig || echo none)" "${CARGO_ZIGBUILD_ZIG_PATH:-unset}" >>"$LOG"
triple=${target%.*.*}
mkdir -p "$CARGO_TARGET_DIR/$triple/release"
printf "stand-in orc-prov-partner for %s\n" "$target" >"$CARGO_TARGET_DIR/$triple/release/orc-prov-partner"
chmod +x "$CARGO_TARGET_DIR/$triple/release/orc-prov-partner"
STUB
stub "$STUBS/cargo-zigbuild" </dev/null
stub "$STUBS/rustup" <<'STUB'
[[ "$*" == "target list --installed" ]] || { echo "unexpected rustup $*" >&2; exit 1; }
printf "%s\n" ${FAKE_TARGETS:-x86_64-unknown-linux-gnu}
STUB
stub "$STUBS/rustc" <<'STUB'
[[ "$*" == "--print sysroot" ]] || { echo "unexpected rustc $*" >&2; exit 1; }
echo "$FAKE_SYSROOT"
STUB
# orc: records where it ran from and its argv, one argument a line, and fails if the token
# is missing from its environment or present in its arguments.
stub "$STUBS/orc-recorder" <<'STUB'
printf "%s\n" "$(basename "$(dirname "$0")")/$(basename "$0")" >"$ORC_RECORD.who"
printf "%s\n" "$@" >"$ORC_RECORD"
[[ ${ORC_REGISTRY_TOKEN:-} == "$EXPECT_TOKEN" ]] || { echo "ORC_REGISTRY_TOKEN not in the environment" >&2; exit 3; }
for arg in "$@"; do [[ $arg != *"$EXPECT_TOKEN"* ]] || { echo "token in argv" >&2; exit 4; }; done
echo "pushed (stand-in orc)"
STUB
orc_stub() { mkdir -p "$(dirname "$1")" && cp "$STUBS/orc-recorder" "$1"; }
zig_stub() { echo 'echo 0.14.1' | stub "$1/zig"; }

# Runs the scratch checkout's script with stand-in tools. Sets OUT (stdout and stderr) and
# RC. Before it, a test may set the variables below or export others.
#   TOOLS  directories to put before $SYSBIN on the PATH (default: $STUBS)
run() {
  local env_args=(
    "PATH=${TOOLS:-$STUBS}:$SYSBIN"
    "HOME=$TMP/home"
    "LOG=$TMP/log"
    "ORC_RECORD=$TMP/orc-argv"
    "EXPECT_TOKEN=$TOKEN"
    "FAKE_SYSROOT=$TMP/sysroot"
    "CARGO_TARGET_DIR=$TMP/target"
  )
  RC=0
  OUT=$(cd "$TMP" && env -i "${env_args[@]}" "${EXTRA_ENV[@]}" \
    bash "$FAKE_REPO/scripts/package-partner-provider.sh" "$@" 2>&1) || RC=$?
}

# Fresh state for each test.
reset() {
  rm -rf "${TMP:?}/home" "$TMP/target" "$TMP/log" "$TMP/orc-argv" "$TMP/orc-argv.who" \
    "$TMP/sysroot" "$TMP/pathbin" "$TMP/zigdir" "$TMP/stage" "$TMP/served.log" "$TMP/python" \
    "$TMP/norustup" "$TMP/nozigbuild" "$TMP/orcbin" "$TMP/mycache" "$TMP/elsewhere.json"
  mkdir -p "$TMP/home"
  : >"$TMP/log"
  : >"$TMP/served.log"
  EXTRA_ENV=()
  zig_stub "$TMP/pathbin"
  # The common case: zig on the PATH, amd64 installed.
  TOOLS=$STUBS:$TMP/pathbin
}

fail() { printf 'FAILED: %s\n' "$*"; printf -- '--- script output (rc=%s)\n%s\n---\n' "${RC:-}" "${OUT:-}"; exit 1; }
expect_rc() { [[ $RC == "$1" ]] || fail "exit code $RC, expected $1"; }
expect_out() { grep -qF -- "$1" <<<"$OUT" || fail "output lacks: $1"; }
expect_no_out() { ! grep -qF -- "$1" <<<"$OUT" || fail "output has: $1"; }
expect_log() { grep -qxF -- "$1" "$TMP/log" || fail "log lacks line: $1 (log: $(cat "$TMP/log"))"; }
expect_no_build() { ! grep -q '^cargo zigbuild' "$TMP/log" || fail "something was built: $(cat "$TMP/log")"; }
expect_argv() { # the orc stand-in's arguments, one a line
  local want
  want=$(printf '%s\n' "$@")
  [[ -f $TMP/orc-argv ]] || fail "orc was not run"
  [[ $(cat "$TMP/orc-argv") == "$want" ]] || fail "orc argv: $(cat "$TMP/orc-argv"), expected: $want"
}
expect_orc() { [[ $(cat "$TMP/orc-argv.who" 2>/dev/null) == "$1" ]] || fail "orc run from $(cat "$TMP/orc-argv.who" 2>/dev/null), expected $1"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# --- the CLI download server ----------------------------------------------------------------

# A CA, a certificate for 127.0.0.1 signed by it, and an HTTPS server for $TMP/zone that logs
# each request line to $TMP/served.log. Started once, by the runner, before the tests (each
# test runs in a subshell).
start_server() {
  [[ -n $SERVER_PID ]] && return
  local pki=$TMP/pki
  mkdir -p "$pki" "$TMP/zone/downloads/orc"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=test-zone-ca -keyout "$pki/ca.key" -out "$pki/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
    -keyout "$pki/server.key" -out "$pki/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\n' >"$pki/ext"
  openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 1 -extfile "$pki/ext" -out "$pki/server.pem" 2>/dev/null
  python3 - "$TMP/zone" "$pki/server.pem" "$pki/server.key" "$TMP/port" "$TMP/served.log" \
    >"$TMP/server.out" 2>&1 <<'EOF' &
import functools, http.server, ssl, sys
root, cert, key, port_file, log_file = sys.argv[1:]
class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        with open(log_file, "a") as log:
            log.write(self.requestline + "\n")
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=root))
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os; os.rename(port_file + ".tmp", port_file)
server.serve_forever()
EOF
  SERVER_PID=$!
  for _ in $(seq 100); do [[ -f $TMP/port ]] && break; sleep 0.1; done
  [[ -f $TMP/port ]] || { echo "the test HTTPS server did not start" >&2; exit 1; }
  ZONE=https://127.0.0.1:$(cat "$TMP/port")
}

# Publishes an orc stand-in as the zone's CLI, with a SHA256SUMS that is right or not.
publish_cli() { # good|bad
  local dir=$TMP/zone/downloads/orc
  orc_stub "$dir/orc-linux-$HOST_ARCH"
  # The other platform's line comes first, so the script must pick its own.
  local other=arm64
  [[ $HOST_ARCH == arm64 ]] && other=amd64
  {
    printf '%s  orc-linux-%s\n' "$(printf other | sha256sum | cut -d' ' -f1)" "$other"
    if [[ $1 == good ]]; then
      printf '%s  orc-linux-%s\n' "$(sha "$dir/orc-linux-$HOST_ARCH")" "$HOST_ARCH"
    else
      printf '%s  orc-linux-%s\n' "$(printf tampered | sha256sum | cut -d' ' -f1)" "$HOST_ARCH"
    fi
  } >"$dir/SHA256SUMS"
}

# --- tests: options and staging -----------------------------------------------------------

test_help_names_everything() {
  run --help
  expect_rc 0
  # shellcheck disable=SC2088 # the help writes these paths with a ~, as a reader types them
  for word in ZIGBUILD_GLIBC 2.28 STAGE_DIR CARGO_TARGET_DIR ORC_APP_MANIFEST ZIG_DIR \
    ORC_REGISTRY_TOKEN ORC_BIN ORC_CLI_CACHE ORC_CA_FILE '~/.local/zig-tools/zig-0.14.1/zig' \
    '~/.cache/orc-cli' 'pip install ziglang' 'cargo install --locked cargo-zigbuild' \
    'rustup target add aarch64-unknown-linux-gnu' linux/amd64 linux/arm64 \
    'downloads/orc/SHA256SUMS' 'orc-prov-partner:default' 'cannot run that command'; do
    expect_out "$word"
  done
  expect_no_build
}

test_builds_both_platforms_by_default() {
  EXTRA_ENV=(FAKE_TARGETS="x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu")
  run
  expect_rc 0
  for triple in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu; do
    expect_log "cargo zigbuild --release --locked -p orc-partner-provider --bin orc-prov-partner --target $triple.2.28"
  done
  local stage=$TMP/target/package/orc-prov-partner
  [[ $(cd "$stage" && echo *) == "SHA256SUMS manifest.json orc-prov-partner-linux-amd64 orc-prov-partner-linux-arm64" ]] ||
    fail "stage holds: $(ls "$stage")"
  (cd "$stage" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not check"
  [[ $(wc -l <"$stage/SHA256SUMS") == 3 ]] || fail "SHA256SUMS: $(cat "$stage/SHA256SUMS")"
  cmp -s "$stage/manifest.json" "$FAKE_REPO/crates/partner-provider/orc-app.json" || fail "manifest differs"
  grep -q 'for x86_64-unknown-linux-gnu.2.28' "$stage/orc-prov-partner-linux-amd64" || fail "amd64 is not the amd64 build"
  grep -q 'for aarch64-unknown-linux-gnu.2.28' "$stage/orc-prov-partner-linux-arm64" || fail "arm64 is not the arm64 build"
  [[ -x $stage/orc-prov-partner-linux-amd64 ]] || fail "the staged binary is not executable"
  expect_out "staged linux/amd64: $stage/orc-prov-partner-linux-amd64 sha256:$(sha "$stage/orc-prov-partner-linux-amd64")"
  expect_out "staged linux/arm64: $stage/orc-prov-partner-linux-arm64 sha256:$(sha "$stage/orc-prov-partner-linux-arm64")"
  [[ ! -e $TMP/orc-argv ]] || fail "orc ran without --push"
}

test_one_platform_glibc_and_stage_dir() {
  mkdir -p "$TMP/stage"
  echo stale >"$TMP/stage/orc-prov-partner-linux-arm64"
  echo keep >"$TMP/stage/notes.txt"
  EXTRA_ENV=(ZIGBUILD_GLIBC=2.31 STAGE_DIR=stage)  # relative: the caller's directory
  run --platform linux/amd64
  expect_rc 0
  expect_log "cargo zigbuild --release --locked -p orc-partner-provider --bin orc-prov-partner --target x86_64-unknown-linux-gnu.2.31"
  ! grep -q aarch64 "$TMP/log" || fail "arm64 was built: $(cat "$TMP/log")"
  [[ ! -e $TMP/stage/orc-prov-partner-linux-arm64 ]] || fail "a stale arm64 binary stayed in the stage"
  [[ -f $TMP/stage/notes.txt ]] || fail "a file the script does not own was removed from the stage"
  [[ $(cut -d' ' -f3 "$TMP/stage/SHA256SUMS" | tr '\n' ' ') == "orc-prov-partner-linux-amd64 manifest.json " ]] ||
    fail "SHA256SUMS: $(cat "$TMP/stage/SHA256SUMS")"
  (cd "$TMP/stage" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not check"
}

test_bad_platform_and_glibc_refused() {
  run --platform linux/riscv64
  expect_rc 2
  expect_out "unknown platform linux/riscv64"
  EXTRA_ENV=(ZIGBUILD_GLIBC=latest)
  run --platform linux/amd64
  expect_rc 1
  expect_out "ZIGBUILD_GLIBC=latest"
  run --frobnicate
  expect_rc 2
  expect_out "unknown argument: --frobnicate"
  expect_no_build
}

test_missing_manifest_named() {
  mv "$FAKE_REPO/crates/partner-provider/orc-app.json" "$TMP/orc-app.json"
  run --platform linux/amd64
  mv "$TMP/orc-app.json" "$FAKE_REPO/crates/partner-provider/orc-app.json"
  expect_rc 1
  expect_out "crates/partner-provider/orc-app.json is missing"
  expect_no_build
  EXTRA_ENV=(ORC_APP_MANIFEST="$TMP/elsewhere.json")
  run --platform linux/amd64
  expect_rc 1
  expect_out "$TMP/elsewhere.json (ORC_APP_MANIFEST) does not exist"
  expect_no_build
  printf '{"other": 1}\n' >"$TMP/elsewhere.json"
  run --platform linux/amd64
  expect_rc 0
  cmp -s "$TMP/elsewhere.json" "$TMP/target/package/orc-prov-partner/manifest.json" || fail "ORC_APP_MANIFEST was not the one staged"
}

# --- tests: Rust targets -----------------------------------------------------------------

test_missing_arm64_target_names_rustup_command() {
  run  # rustup lists x86_64 only
  expect_rc 1
  expect_out "rustup target add aarch64-unknown-linux-gnu"
  expect_out "build linux/amd64 alone with --platform linux/amd64"
  expect_no_build
  run --platform linux/arm64
  expect_rc 1
  expect_out "rustup target add aarch64-unknown-linux-gnu"
  expect_no_build
}

test_targets_from_sysroot_without_rustup() {
  mkdir -p "$TMP/norustup"
  for tool in cargo cargo-zigbuild rustc; do ln -s "$STUBS/$tool" "$TMP/norustup/$tool"; done
  mkdir -p "$TMP/sysroot/lib/rustlib/x86_64-unknown-linux-gnu/lib"
  TOOLS=$TMP/norustup:$TMP/pathbin
  run --platform linux/amd64
  expect_rc 0
  expect_log "cargo zigbuild --release --locked -p orc-partner-provider --bin orc-prov-partner --target x86_64-unknown-linux-gnu.2.28"
  : >"$TMP/log"
  run --platform linux/arm64
  expect_rc 1
  expect_out "rustup target add aarch64-unknown-linux-gnu"
  expect_no_build
}

# --- tests: zig and cargo-zigbuild -------------------------------------------------------

test_zig_from_path_first() {
  zig_stub "$TMP/zigdir"
  zig_stub "$TMP/home/.local/zig-tools/zig-0.14.1"
  EXTRA_ENV=(ZIG_DIR="$TMP/zigdir")
  run --platform linux/amd64
  expect_rc 0
  expect_log "zig $TMP/pathbin/zig $TMP/pathbin/zig"
  expect_out "zig: $TMP/pathbin/zig (0.14.1)"
}

test_zig_from_zig_dir_second() {
  zig_stub "$TMP/zigdir"
  zig_stub "$TMP/home/.local/zig-tools/zig-0.14.1"
  TOOLS=$STUBS
  EXTRA_ENV=(ZIG_DIR="$TMP/zigdir")
  run --platform linux/amd64
  expect_rc 0
  expect_log "zig $TMP/zigdir/zig $TMP/zigdir/zig"  # on the PATH, and cargo-zigbuild's zig
}

test_zig_from_tools_dir_third() {
  zig_stub "$TMP/home/.local/zig-tools/zig-0.14.1"
  TOOLS=$STUBS
  EXTRA_ENV=(ZIG_DIR="$TMP/zigdir-empty")
  run --platform linux/amd64
  expect_rc 0
  expect_log "zig $TMP/home/.local/zig-tools/zig-0.14.1/zig $TMP/home/.local/zig-tools/zig-0.14.1/zig"
}

test_missing_zig_names_all_three_places() {
  TOOLS=$STUBS
  EXTRA_ENV=(ZIG_DIR="$TMP/zigdir-empty")
  run --platform linux/amd64
  expect_rc 1
  expect_out "zig was not found"
  expect_out "not on the PATH"
  expect_out "ZIG_DIR ($TMP/zigdir-empty)"
  expect_out "$TMP/home/.local/zig-tools/zig-0.14.1"
  expect_out "pip install ziglang"
  expect_no_build
  # With Python's ziglang package importable, the message says where its zig is.
  mkdir -p "$TMP/python/ziglang"
  : >"$TMP/python/ziglang/__init__.py"
  EXTRA_ENV+=(PYTHONPATH="$TMP/python")
  run --platform linux/amd64
  expect_rc 1
  expect_out "zig was not found"
  expect_out "ZIG_DIR=$TMP/python/ziglang uses its zig"
  expect_no_build
}

test_missing_cargo_zigbuild_named() {
  mkdir -p "$TMP/nozigbuild"
  for tool in cargo rustup; do ln -s "$STUBS/$tool" "$TMP/nozigbuild/$tool"; done
  TOOLS=$TMP/nozigbuild:$TMP/pathbin
  run --platform linux/amd64
  expect_rc 1
  expect_out "cargo install --locked cargo-zigbuild"
  expect_no_build
}

# --- tests: --push and the orc CLI -------------------------------------------------------

test_push_with_orc_bin() {
  orc_stub "$TMP/orcbin/orc-stub"
  orc_stub "$TMP/pathbin/orc"
  EXTRA_ENV=(ORC_BIN="$TMP/orcbin/orc-stub" ORC_REGISTRY_TOKEN="$TOKEN"
    FAKE_TARGETS="x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu")
  run --push https://zone.example:7070/sys
  expect_rc 0
  local stage=$TMP/target/package/orc-prov-partner
  expect_orc orcbin/orc-stub
  expect_argv --url https://zone.example:7070 registry push sys/orc-prov-partner:default \
    --binary "linux/amd64=$stage/orc-prov-partner-linux-amd64" \
    --binary "linux/arm64=$stage/orc-prov-partner-linux-arm64" \
    --manifest "$stage/manifest.json"
  expect_out "pushed sys/orc-prov-partner:default to https://zone.example:7070"
  expect_no_out "$TOKEN"
}

test_push_one_platform_with_orc_on_path() {
  orc_stub "$TMP/pathbin/orc"
  orc_stub "$TMP/home/.cache/orc-cli/orc"
  EXTRA_ENV=(ORC_REGISTRY_TOKEN="$TOKEN")
  run --platform linux/amd64 --push=https://zone.example/acme/
  expect_rc 0
  local stage=$TMP/target/package/orc-prov-partner
  expect_orc pathbin/orc
  expect_argv --url https://zone.example registry push acme/orc-prov-partner:default \
    --binary "linux/amd64=$stage/orc-prov-partner-linux-amd64" --manifest "$stage/manifest.json"
  expect_no_out "$TOKEN"
}

test_push_with_cached_cli_downloads_nothing() {
  start_server
  publish_cli good
  orc_stub "$TMP/home/.cache/orc-cli/orc"
  EXTRA_ENV=(ORC_REGISTRY_TOKEN="$TOKEN" ORC_CA_FILE="$TMP/pki/ca.pem")
  run --platform linux/amd64 --push "$ZONE/sys"
  expect_rc 0
  expect_orc orc-cli/orc
  expect_out "orc CLI: $TMP/home/.cache/orc-cli/orc (from the cache)"
  [[ ! -s $TMP/served.log ]] || fail "the zone was asked for: $(cat "$TMP/served.log")"
}

test_orc_cli_cache_moves_the_cache() {
  echo 'echo "the default cache was used" >&2; exit 9' | stub "$TMP/home/.cache/orc-cli/orc"
  orc_stub "$TMP/mycache/orc"
  EXTRA_ENV=(ORC_REGISTRY_TOKEN="$TOKEN" ORC_CLI_CACHE="$TMP/mycache")
  run --platform linux/amd64 --push https://zone.example/sys
  expect_rc 0
  expect_orc mycache/orc
}

test_download_checked_and_kept() {
  start_server
  publish_cli good
  rm -rf "$TMP/mycache"
  EXTRA_ENV=(ORC_REGISTRY_TOKEN="$TOKEN" ORC_CA_FILE="$TMP/pki/ca.pem" ORC_CLI_CACHE="$TMP/mycache")
  run --platform linux/amd64 --push "$ZONE/sys"
  expect_rc 0
  local kept=$TMP/mycache/orc
  cmp -s "$kept" "$TMP/zone/downloads/orc/orc-linux-$HOST_ARCH" || fail "the kept CLI is not the published one"
  [[ $(stat -c %a "$kept") == 755 ]] || fail "the kept CLI has mode $(stat -c %a "$kept")"
  [[ $(ls -A "$TMP/mycache") == orc ]] || fail "the cache holds: $(ls -A "$TMP/mycache")"
  expect_orc mycache/orc
  expect_argv --url "$ZONE" registry push sys/orc-prov-partner:default \
    --binary "linux/amd64=$TMP/target/package/orc-prov-partner/orc-prov-partner-linux-amd64" \
    --manifest "$TMP/target/package/orc-prov-partner/manifest.json"
  grep -qx "GET /downloads/orc/SHA256SUMS HTTP/1.1" "$TMP/served.log" || fail "served: $(cat "$TMP/served.log")"
  grep -qx "GET /downloads/orc/orc-linux-$HOST_ARCH HTTP/1.1" "$TMP/served.log" || fail "served: $(cat "$TMP/served.log")"
  # The next run finds it in the cache and asks the zone for nothing.
  : >"$TMP/served.log"
  rm -f "$TMP/orc-argv"
  run --platform linux/amd64 --push "$ZONE/sys"
  expect_rc 0
  expect_out "(from the cache)"
  expect_orc mycache/orc
  [[ ! -s $TMP/served.log ]] || fail "the zone was asked again for: $(cat "$TMP/served.log")"
}

test_download_checksum_mismatch_refused() {
  start_server
  publish_cli bad
  EXTRA_ENV=(ORC_REGISTRY_TOKEN="$TOKEN" ORC_CA_FILE="$TMP/pki/ca.pem")
  run --platform linux/amd64 --push "$ZONE/sys"
  expect_rc 1
  expect_out "the downloaded orc-linux-$HOST_ARCH has sha256 $(sha "$TMP/zone/downloads/orc/orc-linux-$HOST_ARCH")"
  expect_out "refused, nothing was kept"
  [[ -z $(ls -A "$TMP/home/.cache/orc-cli" 2>/dev/null) ]] || fail "the cache holds: $(ls -A "$TMP/home/.cache/orc-cli")"
  [[ ! -e $TMP/orc-argv ]] || fail "the refused CLI ran"
  expect_no_build
}

test_download_needs_the_zone_ca() {
  start_server
  publish_cli good
  EXTRA_ENV=(ORC_REGISTRY_TOKEN="$TOKEN")
  run --platform linux/amd64 --push "$ZONE/sys"
  expect_rc 1
  expect_out "could not download $ZONE/downloads/orc/SHA256SUMS"
  expect_out "ORC_CA_FILE"
  [[ -z $(ls -A "$TMP/home/.cache/orc-cli" 2>/dev/null) ]] || fail "the cache holds: $(ls -A "$TMP/home/.cache/orc-cli")"
}

test_bad_push_url_refused() {
  EXTRA_ENV=(ORC_REGISTRY_TOKEN="$TOKEN")
  for url in http://zone.example/sys https://zone.example https://zone.example/ \
    https://zone.example/sys/extra https://user:pw@zone.example/sys 'https://zone.example/sys?x=1' \
    zone.example/sys; do
    run --platform linux/amd64 --push "$url"
    expect_rc 2
    expect_out "--push $url is not https://<zone>/<org>"
  done
  run --push
  expect_rc 2
  expect_out "--push needs a URL"
  expect_no_build
}

test_push_needs_registry_token() {
  orc_stub "$TMP/pathbin/orc"
  run --platform linux/amd64 --push https://zone.example/sys
  expect_rc 1
  expect_out "--push needs ORC_REGISTRY_TOKEN"
  expect_no_build
  [[ ! -e $TMP/orc-argv ]] || fail "orc ran"
}

test_orc_bin_must_exist() {
  EXTRA_ENV=(ORC_REGISTRY_TOKEN="$TOKEN" ORC_BIN="$TMP/no-such-orc")
  run --platform linux/amd64 --push https://zone.example/sys
  expect_rc 1
  expect_out "ORC_BIN=$TMP/no-such-orc is not an executable"
  expect_no_build
}

# --- tests: the scripts themselves, and the real build -----------------------------------

test_shellcheck_clean() {
  shellcheck "$SCRIPT" "${BASH_SOURCE[0]}" || fail "shellcheck found problems"
}

# The one real build: linux/amd64 with the real cargo zigbuild, into CARGO_TARGET_DIR (so a
# build already made there is reused), with the committed manifest or a stand-in while the
# manifest is not in the tree.
test_real_build_amd64() {
  local stage=$TMP/real-stage manifest=$REPO/crates/partner-provider/orc-app.json env_args=()
  if [[ ! -f $manifest ]]; then
    manifest=$FAKE_REPO/crates/partner-provider/orc-app.json
    env_args+=(ORC_APP_MANIFEST="$manifest")
    echo "  (crates/partner-provider/orc-app.json is not in the tree: packaging a stand-in manifest)"
  fi
  RC=0
  OUT=$(cd "$REPO" && env HOME="$REAL_HOME" PATH="$REAL_PATH" STAGE_DIR="$stage" "${env_args[@]}" \
    bash "$SCRIPT" --platform linux/amd64 2>&1) || RC=$?
  expect_rc 0
  local bin=$stage/orc-prov-partner-linux-amd64
  [[ $(cd "$stage" && echo *) == "SHA256SUMS manifest.json orc-prov-partner-linux-amd64" ]] ||
    fail "stage holds: $(ls "$stage")"
  (cd "$stage" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not check"
  cmp -s "$stage/manifest.json" "$manifest" || fail "the staged manifest differs"
  expect_out "staged linux/amd64: $bin sha256:$(sha "$bin")"
  LC_ALL=C readelf -h "$bin" | grep -Eq 'Class:[[:space:]]+ELF64' || fail "not a 64-bit ELF"
  LC_ALL=C readelf -h "$bin" | grep -Eq 'Machine:[[:space:]]+Advanced Micro Devices X86-64' || fail "not x86-64"
  local newest
  newest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  [[ -n $newest ]] || fail "no GLIBC symbol versions in $bin"
  [[ $(printf '%s\n2.28\n' "$newest" | sort -V | tail -1) == 2.28 ]] ||
    fail "the binary needs glibc $newest, newer than 2.28"
  "$bin" --help >/dev/null || fail "the staged binary does not run"
  echo "  (newest glibc symbol version required: $newest)"
}

# The real build again (cargo reuses it), pushed with the real CLI to a zone `orc up` runs on
# loopback: the tag moves to the pushed package, and a reconfigure of sys/sys/partner rolls
# both replicas onto it.
test_real_push_to_an_orc_up_zone() {
  local target=${CARGO_TARGET_DIR:-$REPO/target}
  local orc=$target/debug/orc data=$TMP/up-data up_log=$TMP/up.log
  [[ -x $orc ]] || fail "$orc is missing: build it first (cargo build -p orc-cli)"
  local any=127.0.0.1:0
  "$orc" up --data-dir "$data" --http "$any" --grpc "$any" --edge "$any" \
    --hetzner-emu "$any" --vultr-emu "$any" --robot-emu "$any" >"$up_log" 2>&1 &
  local up_pid=$!
  # shellcheck disable=SC2064 # the pid is known now
  trap "kill -INT $up_pid 2>/dev/null; wait $up_pid 2>/dev/null" EXIT
  local tries=0
  until grep -q '^partner ' "$up_log"; do
    kill -0 "$up_pid" 2>/dev/null || fail "orc up stopped: $(cat "$up_log")"
    ((++tries < 600)) || fail "orc up did not come up: $(cat "$up_log")"
    sleep 0.5
  done
  export ORC_DATA_DIR=$data
  local zone local_digest
  zone=$(cat "$data/zone-url")
  local_digest=$(registry_tag "$orc" digest)
  [[ $(registry_tag "$orc" version) == *+local ]] || fail "orc up did not publish its own build"

  RC=0
  OUT=$(cd "$REPO" && env HOME="$REAL_HOME" PATH="$REAL_PATH" ORC_BIN="$orc" \
    ORC_REGISTRY_TOKEN="$(cat "$data/admin-token")" ORC_CA_FILE="$data/ca.pem" \
    STAGE_DIR="$TMP/real-stage" bash "$SCRIPT" --platform linux/amd64 --push "$zone/sys" 2>&1) || RC=$?
  expect_rc 0
  local pushed
  pushed=$(registry_tag "$orc" digest)
  [[ $pushed != "$local_digest" ]] || fail "the tag still names orc up's package"
  [[ $(registry_tag "$orc" version) != *+local ]] || fail "the pushed package is not the one staged"
  expect_out "published sys/orc-prov-partner:default as $pushed"
  ! grep -qF "$(cat "$data/admin-token")" <<<"$OUT" || fail "the token was printed"

  RC=0
  OUT=$("$orc" pool reconfigure sys/sys/partner 2>&1) || RC=$?
  expect_rc 0
  expect_out "running sys/orc-prov-partner:default ($pushed)"
  # Both replicas roll onto the pushed binary and run.
  tries=0
  until [[ $("$orc" pool show sys/sys/partner --json | python3 -c '
import json, sys
pool = json.load(sys.stdin)["pool"]
print(pool["app"]["digest"], pool["nodes"]["running"])') == "$pushed 2" ]]; do
    ((++tries < 240)) || fail "the partner did not run the pushed package: $("$orc" pool show sys/sys/partner)"
    sleep 0.5
  done
  echo "  (pushed $pushed; the partner pool runs it)"
}

# The digest or version of sys/orc-prov-partner:default in the registry of `orc up`'s zone.
registry_tag() {
  "$1" registry list sys --json | python3 -c '
import json, sys
for app in json.load(sys.stdin):
    for tag in app["tags"]:
        if tag["package"] == "sys/orc-prov-partner:default":
            print(tag[sys.argv[1]])' "$2"
}

# --- runner ------------------------------------------------------------------------------

mapfile -t ALL < <(declare -F | awk '$3 ~ /^test_/ { print substr($3, 6) }')
SELECTED=("$@")
((${#SELECTED[@]})) || SELECTED=("${ALL[@]}")
start_server
passed=0
failed=()
for name in "${SELECTED[@]}"; do
  declare -F "test_$name" >/dev/null || { echo "no test named $name" >&2; exit 2; }
  reset
  started=$(date +%s)
  if output=$("test_$name" 2>&1); then
    printf 'ok   %s (%d s)\n' "$name" "$(($(date +%s) - started))"
    [[ -n $output ]] && printf '%s\n' "$output"
    passed=$((passed + 1))
  else
    printf 'FAIL %s\n%s\n' "$name" "$output"
    failed+=("$name")
  fi
done
printf '\n%d passed, %d failed%s\n' "$passed" "${#failed[@]}" "${failed[*]:+: ${failed[*]}}"
((${#failed[@]} == 0))
