#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian packages that scripts/bench needs besides the build's
# (scripts/install-deps.sh): the two FUSE mounts it compares hoardfs with,
# the Fashion-MNIST files it expands into a small-file dataset, and fuse3.
# Idempotent: packages already present are skipped, so a second run does no
# network access at all.
set -eu

pkgs="s3fs rclone fuse3 dataset-fashion-mnist python3"

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
	echo "install-bench-deps: missing packages:$missing; run as root to install them" >&2
	exit 1
fi

echo "install-bench-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
