#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are not installed yet
# (idempotent; as root or with sudo; --no-install-recommends, so every package
# the project needs must be named). Used by setup.sh and sanitize.sh.
# Usage: scripts/install-packages.sh LABEL PACKAGE...
set -euo pipefail
label="$1"
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "$label: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
