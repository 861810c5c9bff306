#!/bin/sh
# SPDX-License-Identifier: MIT
# hoardfs-run.sh - run a training command with its --data_url mounted by
# hoardfs, then unmount: a boot script for ModelArts training jobs (see
# docs/modelarts.md), usable anywhere else too.
#
#   hoardfs-run.sh COMMAND [ARGS...]
#
# When ARGS hold --data_url=URL or --data_url URL (also --data-url) with
# URL obs://BUCKET/PREFIX or s3://BUCKET/PREFIX, the prefix is mounted
# read-only at $HOARDFS_MOUNTPOINT and URL is replaced by that path (with
# the trailing '/' kept when URL had one) before COMMAND runs.  A local
# path is left alone and nothing is mounted.  hoardfs runs in the
# foreground, in the background of this script, so its log goes to this
# script's standard error (the job log) rather than to syslog.  When
# COMMAND ends the mount is removed and hoardfs is waited for.  The exit
# status is COMMAND's, or hoardfs's when the mount fails (COMMAND then does
# not run).
#
# Environment:
#   HOARDFS              the hoardfs binary (default: hoardfs on PATH)
#   HOARDFS_MOUNTPOINT   where to mount (default /cache/hoardfs-mnt/data_url)
#   HOARDFS_OPTS         extra hoardfs options, split on blanks
#                        (default: --metadata-ttl forever)
#   HOARDFS_MOUNT_TIMEOUT  seconds to wait for the mount (default 300)
# hoardfs itself reads the endpoint (OBS_ENDPOINT, S3_ENDPOINT, ...) and
# the credentials (OBS_ACCESS_KEY_ID, ...) from the environment; or give
# HOARDFS_OPTS="--endpoint URL --passwd-file FILE".
set -euf

prog=${0##*/}
hoardfs=${HOARDFS:-hoardfs}
mnt=${HOARDFS_MOUNTPOINT:-/cache/hoardfs-mnt/data_url}
opts=${HOARDFS_OPTS---metadata-ttl forever}
timeout=${HOARDFS_MOUNT_TIMEOUT:-300}

if [ $# -eq 0 ]; then
	echo "usage: $prog COMMAND [ARGS...] (with --data_url obs://BUCKET/PREFIX)" >&2
	exit 2
fi

# Pass 1: the obs:// or s3:// URL given as --data_url, if any.
url=""
value_next=0
for a in "$@"; do
	if [ $value_next -eq 1 ]; then
		value_next=0
		v=$a
	else
		case $a in
		--data_url=* | --data-url=*) v=${a#*=} ;;
		--data_url | --data-url) value_next=1; continue ;;
		*) continue ;;
		esac
	fi
	case $v in
	obs://* | s3://*)
		if [ -n "$url" ] && [ "$url" != "$v" ]; then
			echo "$prog: more than one --data_url to mount" >&2
			exit 2
		fi
		url=$v
		;;
	esac
done
if [ -z "$url" ]; then
	exec "$@"
fi
mkdir -p "$mnt"
mnt=$(cd "$mnt" && pwd -P) # as /proc/mounts shows it
case $url in
*/) path="$mnt/" ;;
*) path=$mnt ;;
esac

# Pass 2: the same words, with the URL replaced by the mountpoint.
n=$#
value_next=0
while [ "$n" -gt 0 ]; do
	a=$1
	shift
	n=$((n - 1))
	if [ $value_next -eq 1 ]; then
		value_next=0
		[ "$a" != "$url" ] || a=$path
	else
		case $a in
		--data_url=* | --data-url=*)
			[ "${a#*=}" != "$url" ] || a="${a%%=*}=$path"
			;;
		--data_url | --data-url) value_next=1 ;;
		esac
	fi
	set -- "$@" "$a"
done

mounted() {
	awk -v m="$mnt" '$2 == m && $3 == "fuse.hoardfs" { f = 1 }
		END { exit !f }' /proc/mounts
}

pid=""
# shellcheck disable=SC2317 # called by the EXIT trap
finish() {
	[ -n "$pid" ] || return 0
	if mounted; then
		fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null ||
			fusermount3 -u -z "$mnt" || true
	fi
	wait "$pid" || true
}
trap finish EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# shellcheck disable=SC2086 # HOARDFS_OPTS is a list of words
"$hoardfs" -f $opts "$url" "$mnt" &
pid=$!
waited=0
until mounted; do
	if ! kill -0 "$pid" 2>/dev/null; then
		rc=0
		wait "$pid" || rc=$?
		pid=""
		echo "$prog: hoardfs could not mount $url at $mnt (exit $rc)" >&2
		exit $((rc ? rc : 1))
	fi
	if [ $waited -ge $((timeout * 10)) ]; then
		echo "$prog: $url not mounted at $mnt after ${timeout}s" >&2
		kill "$pid" 2>/dev/null || true
		exit 1
	fi
	sleep 0.1
	waited=$((waited + 1))
done
echo "$prog: $url mounted at $mnt" >&2

rc=0
"$@" || rc=$?
exit $rc
