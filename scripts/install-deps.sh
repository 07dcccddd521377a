#!/usr/bin/env bash
# Installs the Debian packages mlaserve needs to build, test and serve. Idempotent; only
# runs apt-get when something is missing. Needs root (or: sudo bash scripts/install-deps.sh).
set -eu
pkgs="build-essential pkg-config libjansson-dev libpcre2-dev libicu-dev libmicrohttpd-dev
      libcurl4-openssl-dev libgnutls28-dev openmpi-bin libopenmpi-dev gnuplot-nox nodejs npm curl bc
      python3 openssl"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# nodejs may come from elsewhere (a newer node on PATH is fine).
if command -v node >/dev/null && command -v npm >/dev/null; then
	missing=$(echo "$missing" | sed 's/\bnodejs\b//; s/\bnpm\b//')
fi
if [ -n "$(echo $missing)" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages:$missing" >&2
		echo "run once: sudo bash scripts/install-deps.sh" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
fi
