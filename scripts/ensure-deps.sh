#!/usr/bin/env bash
# Makes sure the Debian packages the build needs are present. As root it installs the
# missing ones with apt-get; otherwise it prints the exact command and fails.
# Usage: scripts/ensure-deps.sh [extra-package ...]
set -euo pipefail
pkgs=(cmake g++ make libeigen3-dev catch2 libbenchmark-dev "$@")
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  echo "blockgtq: installing missing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; then
    apt-get update -qq
    apt-get install -y --no-install-recommends "${missing[@]}"
  fi
else
  echo "blockgtq: missing Debian packages. Run:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
