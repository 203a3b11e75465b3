#!/usr/bin/env bash
# Builds the partner provider, orc-prov-partner, as an app package for a zone's registry, and
# with --push publishes it. See usage() below and docs/partner/packaging.md.
set -euo pipefail

PACKAGE=orc-partner-provider
BIN=orc-prov-partner
APP_NAME=orc-prov-partner
APP_TAG=default

usage() {
  cat <<'EOF'
Usage: scripts/package-partner-provider.sh [--push https://<zone>/<org>] [--platform P]... [--help]

Builds orc-prov-partner (package orc-partner-provider) in release with `cargo zigbuild`,
stages it with its app manifest and a SHA256SUMS, and with --push publishes the package as
<org>/orc-prov-partner:default on the zone.

Options:
  --push https://<zone>/<org>   publish to the registry of the zone at https://<zone>, in org
                                <org> (sys for the zone's own partner). Needs ORC_REGISTRY_TOKEN.
  --platform linux/amd64|linux/arm64
                                build this platform; repeat for both. Default: both.
                                linux/amd64 is x86_64-unknown-linux-gnu, linux/arm64 is
                                aarch64-unknown-linux-gnu.
  --help                        this text.

Variables:
  ZIGBUILD_GLIBC      the oldest glibc the binaries must run on (default 2.28): each platform
                      is built with `cargo zigbuild --target <triple>.<ZIGBUILD_GLIBC>`.
  CARGO_TARGET_DIR    cargo's output directory (default: target/ in this checkout).
  STAGE_DIR           where the package is staged (default:
                      $CARGO_TARGET_DIR/package/orc-prov-partner).
  ORC_APP_MANIFEST    the app manifest to package (default:
                      crates/partner-provider/orc-app.json in this checkout).
  ZIG_DIR             a directory holding zig (see "Finding zig").
  ORC_REGISTRY_TOKEN  the registry token for --push. The orc CLI reads it from the
                      environment; the script never prints it or passes it as an argument.
  ORC_BIN             the orc CLI to push with (see "Finding the orc CLI").
  ORC_CLI_CACHE       where a downloaded orc CLI is kept (default ~/.cache/orc-cli).
  ORC_CA_FILE         the CA certificate that signed the zone's TLS certificate, in PEM;
                      used for the CLI download and read by the CLI itself.

Finding zig (cargo-zigbuild links with it), first found wins:
  1. zig on the PATH;
  2. $ZIG_DIR/zig;
  3. ~/.local/zig-tools/zig-0.14.1/zig.
  When zig comes from 2 or 3, its directory is put first on the PATH; cargo-zigbuild is
  told to use that zig (CARGO_ZIGBUILD_ZIG_PATH), not Python's ziglang package.
  With none, the script stops; `pip install ziglang` is one way to get zig (the package's
  directory holds the zig binary: point ZIG_DIR at it). cargo-zigbuild itself comes from
  `cargo install --locked cargo-zigbuild`.

Rust targets: each platform's standard library must be installed (`rustup target list
--installed`, or the sysroot's lib/rustlib/<triple> when rustup is absent); a missing one
stops the script with the command that installs it, such as
`rustup target add aarch64-unknown-linux-gnu`. A machine with no route to the Rust toolchain
server cannot run that command, so there linux/arm64 stops at this message: build with
--platform linux/amd64.

Finding the orc CLI (only with --push), first found wins:
  1. $ORC_BIN;
  2. orc on the PATH;
  3. $ORC_CLI_CACHE/orc (default ~/.cache/orc-cli/orc);
  4. a download from the zone: https://<zone>/downloads/orc/orc-linux-<amd64|arm64> for
     this host, checked against https://<zone>/downloads/orc/SHA256SUMS. A binary whose
     sha256 does not match is refused and not kept; a good one is kept as
     $ORC_CLI_CACHE/orc, so the next run finds it at 3 without downloading.

Output, in $STAGE_DIR:
  orc-prov-partner-linux-amd64, orc-prov-partner-linux-arm64 (the platforms built),
  manifest.json, SHA256SUMS (sha256sum format, of every other file there).

The push runs:
  orc --url https://<zone> registry push <org>/orc-prov-partner:default \
    --binary linux/amd64=<path> [--binary linux/arm64=<path>] --manifest <stage>/manifest.json
EOF
}

say() { printf '%s\n' "$*"; }
die() { printf 'package-partner-provider: %s\n' "$*" >&2; exit 1; }
usage_error() {
  printf 'package-partner-provider: %s\n' "$*" >&2
  printf 'Run with --help for the options.\n' >&2
  exit 2
}
# Relative paths given by the caller mean the caller's directory: the script works from the
# checkout's root.
absolute() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$CALLER_DIR/$1" ;; esac; }

triple_of() {
  case $1 in
    linux/amd64) echo x86_64-unknown-linux-gnu ;;
    linux/arm64) echo aarch64-unknown-linux-gnu ;;
    *) return 1 ;;
  esac
}

# --- arguments ---------------------------------------------------------------------------

PUSH_URL=
PLATFORMS=()
while (($#)); do
  case $1 in
    --help | -h) usage; exit 0 ;;
    --push)
      (($# >= 2)) || usage_error "--push needs a URL: --push https://<zone>/<org>"
      PUSH_URL=$2
      shift 2
      ;;
    --push=*) PUSH_URL=${1#--push=}; shift ;;
    --platform)
      (($# >= 2)) || usage_error "--platform needs a value: linux/amd64 or linux/arm64"
      PLATFORMS+=("$2")
      shift 2
      ;;
    --platform=*) PLATFORMS+=("${1#--platform=}"); shift ;;
    *) usage_error "unknown argument: $1" ;;
  esac
done

((${#PLATFORMS[@]})) || PLATFORMS=(linux/amd64 linux/arm64)
BUILD=()
for platform in "${PLATFORMS[@]}"; do
  triple_of "$platform" >/dev/null ||
    usage_error "unknown platform $platform: use linux/amd64 or linux/arm64"
  [[ " ${BUILD[*]-} " == *" $platform "* ]] || BUILD+=("$platform")
done

ZONE_URL=
ORG=
if [[ -n $PUSH_URL ]]; then
  # https://<host[:port]>/<org>, with at most a trailing slash: nothing else, so the org is
  # never guessed from a longer path and no credential rides in the URL.
  push_url_shape='^https://([][A-Za-z0-9.:_-]+)/([A-Za-z0-9][A-Za-z0-9._-]*)/?$'
  if [[ $PUSH_URL =~ $push_url_shape ]]; then
    ZONE_URL="https://${BASH_REMATCH[1]}"
    ORG=${BASH_REMATCH[2]}
  else
    usage_error "--push $PUSH_URL is not https://<zone>/<org> (https, a zone host, then one org name and nothing after it)"
  fi
  [[ -n ${ORC_REGISTRY_TOKEN:-} ]] ||
    die "--push needs ORC_REGISTRY_TOKEN, a registry token of org $ORG, in the environment"
  export ORC_REGISTRY_TOKEN
fi

ZIGBUILD_GLIBC=${ZIGBUILD_GLIBC:-2.28}
[[ $ZIGBUILD_GLIBC =~ ^[0-9]+\.[0-9]+$ ]] ||
  die "ZIGBUILD_GLIBC=$ZIGBUILD_GLIBC is not a glibc version such as 2.28"

CALLER_DIR=$PWD
# A path in ORC_BIN, ORC_CA_FILE or ZIG_DIR keeps meaning the caller's directory after the cd.
[[ ${ORC_BIN:-} == */* ]] && ORC_BIN=$(absolute "$ORC_BIN")
[[ -n ${ORC_CA_FILE:-} ]] && ORC_CA_FILE=$(absolute "$ORC_CA_FILE")
[[ -n ${ZIG_DIR:-} ]] && ZIG_DIR=$(absolute "$ZIG_DIR")
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=$(absolute "${CARGO_TARGET_DIR:-$REPO/target}")
STAGE=$(absolute "${STAGE_DIR:-$TARGET_DIR/package/$APP_NAME}")
if [[ -n ${ORC_APP_MANIFEST:-} ]]; then
  MANIFEST=$(absolute "$ORC_APP_MANIFEST")
  [[ -f $MANIFEST ]] || die "the app manifest $MANIFEST (ORC_APP_MANIFEST) does not exist"
else
  MANIFEST=$REPO/crates/partner-provider/orc-app.json
  [[ -f $MANIFEST ]] ||
    die "the app manifest crates/partner-provider/orc-app.json is missing from $REPO (ORC_APP_MANIFEST names another file)"
fi
cd "$REPO"
export CARGO_TARGET_DIR=$TARGET_DIR

# --- tools -------------------------------------------------------------------------------

find_zig() {
  local tools_dir=$HOME/.local/zig-tools/zig-0.14.1 found
  if found=$(command -v zig); then
    ZIG=$found
    return
  fi
  for dir in ${ZIG_DIR:+"$ZIG_DIR"} "$tools_dir"; do
    if [[ -x $dir/zig && ! -d $dir/zig ]]; then
      ZIG=$dir/zig
      export PATH="$dir:$PATH"
      return
    fi
  done
  local hint=
  if found=$(python3 -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))' 2>/dev/null); then
    hint=" Python's ziglang package is installed: ZIG_DIR=$found uses its zig."
  fi
  die "zig was not found: not on the PATH, not in ZIG_DIR (${ZIG_DIR:-unset}), not in $tools_dir. \`pip install ziglang\` is one way to get it.$hint"
}

check_target() { # platform
  local platform=$1 triple sysroot installed other
  triple=$(triple_of "$platform")
  if command -v rustup >/dev/null; then
    installed=$(rustup target list --installed) || die "rustup could not list the installed targets"
    grep -qx "$triple" <<<"$installed" && return
  else
    sysroot=$(rustc --print sysroot) || die "rustc is missing: install the Rust toolchain"
    [[ -d $sysroot/lib/rustlib/$triple/lib ]] && return
  fi
  other=linux/amd64
  [[ $platform == linux/amd64 ]] && other=linux/arm64
  die "the Rust standard library for $triple ($platform) is not installed: run \`rustup target add $triple\`, or build $other alone with --platform $other"
}

command -v cargo >/dev/null || die "cargo is missing: install the Rust toolchain"
command -v cargo-zigbuild >/dev/null ||
  die "cargo-zigbuild is missing: install it with \`cargo install --locked cargo-zigbuild\`"
find_zig
# cargo-zigbuild would try `python3 -m ziglang` before any zig: a python that cannot exist
# and the zig found above make it use that zig and no other.
export CARGO_ZIGBUILD_ZIG_PATH=$ZIG CARGO_ZIGBUILD_PYTHON_PATH=/dev/null/no-python
for platform in "${BUILD[@]}"; do check_target "$platform"; done

# --- the orc CLI (only to push) ----------------------------------------------------------

host_platform() {
  case $(uname -m) in
    x86_64 | amd64) echo amd64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) die "no orc CLI is published for this host's architecture, $(uname -m): set ORC_BIN" ;;
  esac
}

download_orc() { # cache dir
  local cache=$1 name tmp want got
  name=orc-linux-$(host_platform)
  local base=$ZONE_URL/downloads/orc
  local curl_args=(--fail --silent --show-error --location --proto '=https' --max-time 300)
  [[ -n ${ORC_CA_FILE:-} ]] && curl_args+=(--cacert "$ORC_CA_FILE")
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.download.XXXXXX")
  # Nothing from a failed download is kept.
  trap 'rm -rf "$tmp"' EXIT
  say "downloading the orc CLI from $base/$name" >&2
  curl "${curl_args[@]}" -o "$tmp/SHA256SUMS" "$base/SHA256SUMS" ||
    die "could not download $base/SHA256SUMS (set ORC_CA_FILE to the zone's CA certificate if the zone signs its own)"
  want=$(awk -v name="$name" '$2 == name || $2 == "*" name { print $1 }' "$tmp/SHA256SUMS")
  [[ $want =~ ^[0-9a-f]{64}$ ]] || die "$base/SHA256SUMS has no single sha256 for $name"
  curl "${curl_args[@]}" -o "$tmp/$name" "$base/$name" || die "could not download $base/$name"
  got=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
  [[ $got == "$want" ]] ||
    die "the downloaded $name has sha256 $got, but $base/SHA256SUMS says $want: refused, nothing was kept"
  chmod 0755 "$tmp/$name"
  mv -f "$tmp/$name" "$cache/orc"
  rm -rf "$tmp"
  trap - EXIT
  say "kept the orc CLI (sha256 $got) in $cache/orc" >&2
}

find_orc() {
  local cache found
  cache=$(absolute "${ORC_CLI_CACHE:-$HOME/.cache/orc-cli}")
  if [[ -n ${ORC_BIN:-} ]]; then
    ORC=$(command -v "$ORC_BIN") || die "ORC_BIN=$ORC_BIN is not an executable"
    [[ -x $ORC && ! -d $ORC ]] || die "ORC_BIN=$ORC_BIN is not an executable"
    ORC_FROM="ORC_BIN"
  elif found=$(command -v orc); then
    ORC=$found
    ORC_FROM="the PATH"
  elif [[ -x $cache/orc ]]; then
    ORC=$cache/orc
    ORC_FROM="the cache"
  else
    download_orc "$cache"
    ORC=$cache/orc
    ORC_FROM="$ZONE_URL"
  fi
}

if [[ -n $PUSH_URL ]]; then
  find_orc
  say "orc CLI: $ORC (from $ORC_FROM)"
fi

# --- build and stage ---------------------------------------------------------------------

say "zig: $ZIG ($("$ZIG" version 2>/dev/null || echo "version unknown"))"
mkdir -p "$STAGE"
rm -f "$STAGE"/"$BIN"-linux-* "$STAGE/manifest.json" "$STAGE/SHA256SUMS"
PUSH_ARGS=()
for platform in "${BUILD[@]}"; do
  triple=$(triple_of "$platform")
  say "building $BIN for $platform ($triple, glibc $ZIGBUILD_GLIBC) in $TARGET_DIR"
  cargo zigbuild --release --locked -p "$PACKAGE" --bin "$BIN" --target "$triple.$ZIGBUILD_GLIBC"
  built=$TARGET_DIR/$triple/release/$BIN
  [[ -f $built ]] || die "cargo zigbuild finished but $built is not there"
  staged=$STAGE/$BIN-${platform//\//-}
  install -m 0755 "$built" "$staged"
  say "staged $platform: $staged sha256:$(sha256sum "$staged" | cut -d' ' -f1)"
  PUSH_ARGS+=(--binary "$platform=$staged")
done
install -m 0644 "$MANIFEST" "$STAGE/manifest.json"
(cd "$STAGE" && sha256sum "$BIN"-linux-* manifest.json >SHA256SUMS)
say "staged the manifest $STAGE/manifest.json (from $MANIFEST) and $STAGE/SHA256SUMS"

# --- push --------------------------------------------------------------------------------

if [[ -n $PUSH_URL ]]; then
  ref=$ORG/$APP_NAME:$APP_TAG
  say "pushing $ref to $ZONE_URL"
  "$ORC" --url "$ZONE_URL" registry push "$ref" "${PUSH_ARGS[@]}" --manifest "$STAGE/manifest.json"
  say "pushed $ref to $ZONE_URL"
fi
