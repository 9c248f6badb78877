#!/usr/bin/env bash
# Unpacks a Debian package's files into DIR without installing it (no maintainer scripts, no services,
# nothing registered with dpkg): for a tool the tests run from there. Downloads with apt-get (updating
# the package lists first, as root or with sudo, when they do not have it).
# Usage: scripts/unpack-deb.sh PACKAGE DIR
set -euo pipefail
package="$1"
dir="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! (cd "$tmp" && apt-get download -q "$package" >/dev/null 2>&1); then
  $SUDO apt-get update -q
  (cd "$tmp" && apt-get download -q "$package")
fi
mkdir -p "$dir"
dpkg-deb -x "$tmp"/"$package"_*.deb "$dir"
echo "unpacked $package into $dir"
