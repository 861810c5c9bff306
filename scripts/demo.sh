#!/bin/sh
# SPDX-License-Identifier: MIT
# `make demo` entry point: runs scripts/demo.py with Debian's Python (the
# one that has numpy and boto3) and a controlled environment.
set -eu
here=$(dirname "$0")
bin=${1:-build/hoardfs}
exec env -u AWS_CA_BUNDLE /usr/bin/python3 "$here/demo.py" "$bin"
