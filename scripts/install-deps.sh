#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian packages that building, testing and the demo need,
# or, given package names as arguments, those instead (scripts/bench uses
# that for its own).
# Idempotent: packages already present are skipped, so a second run does no
# network access at all.
set -eu

pkgs="build-essential pkg-config
libfuse3-dev fuse3 mount
libcurl4-openssl-dev libssl-dev libsqlite3-dev libxml2-dev libjansson-dev
libcmocka-dev
clang-format cppcheck shellcheck
clang libclang-rt-14-dev
groff-base man-db
python3-pytest python3-boto3 python3-numpy python3-yaml
dataset-fashion-mnist
attr"

# Arguments, when given, replace the list.
if [ $# -gt 0 ]; then
	pkgs="$*"
fi

missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages:$missing; run as root to install them" >&2
	exit 1
fi

echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
