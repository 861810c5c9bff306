#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian packages that scripts/bench needs besides the build's
# (scripts/install-deps.sh): the two FUSE mounts it compares hoardfs with,
# the Fashion-MNIST files it expands into a small-file dataset, and fuse3.
# Idempotent, as install-deps.sh is: it does the work.
set -eu
exec sh "$(dirname "$0")/install-deps.sh" s3fs rclone fuse3 \
	dataset-fashion-mnist python3
