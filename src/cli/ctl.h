/* SPDX-License-Identifier: MIT */
/*
 * Commands for a running mount: hoardfs warm, status and evict.  They talk
 * to the daemon only through the mount (getxattr of the control attributes
 * of src/fs/ctl.c), so they work from any process or container that sees
 * the mountpoint.  Argument parsing, shard selection and byte formatting
 * are pure and unit-tested; the rest is in ctl.c and ctl_warm.c.
 */
#ifndef HOARDFS_CLI_CTL_H
#define HOARDFS_CLI_CTL_H

#include <stddef.h>
#include <stdint.h>

#define CTL_DEFAULT_JOBS 8
/* Each job holds one of the daemon's 64 FUSE threads for a whole fetch;
 * half of them stay free for the readers the warm should not stall. */
#define CTL_MAX_JOBS   32
#define CTL_MAX_SHARDS 1000000

enum ctl_cmd {
	CTL_CMD_WARM,
	CTL_CMD_STATUS,
	CTL_CMD_EVICT,
};

/* A parsed command line.  @paths points into argv. */
struct ctl_args {
	enum ctl_cmd cmd;
	const char **paths; /* owned array of borrowed strings */
	size_t npaths;
	unsigned jobs;	  /* warm: worker threads */
	unsigned shard_k; /* warm: this shard, 0-based */
	unsigned shard_n; /* warm: shard count; 0: no sharding */
	int background;	  /* warm --background */
	int json;	  /* status --json */
	int all;	  /* evict --all */
	int help;	  /* --help */
};

/* ctl_is_command - nonzero when @word names a command ("warm", ...). */
int ctl_is_command(const char *word);

/*
 * ctl_main - run the command in @argv[0] with its arguments.  Returns the
 * exit status: 0 success, 1 some file or the mount failed, 2 usage.
 */
int ctl_main(int argc, char **argv);

/*
 * ctl_parse - parse @argv (argv[0] is the command) into @a.  On a usage
 * error writes one line naming the option or argument into @err and
 * returns -EINVAL; -ENOMEM when out of memory; else 0 (also for --help:
 * check a->help).  Free with ctl_args_free().
 */
int ctl_parse(int argc, char **argv, struct ctl_args *a, char *err,
	      size_t errlen) __attribute__((warn_unused_result));

/* ctl_args_free - free what @a owns. */
void ctl_args_free(struct ctl_args *a);

/* ctl_usage - the --help text of @cmd. */
const char *ctl_usage(enum ctl_cmd cmd);

/*
 * ctl_shard_parse - "K/N" with 0 <= K < N <= CTL_MAX_SHARDS into @k, @n.
 * Returns 0 or -EINVAL.
 */
int ctl_shard_parse(const char *text, unsigned *k, unsigned *n)
	__attribute__((warn_unused_result));

/* ctl_key_hash - FNV-1a 64 of @key: the documented, stable shard hash. */
uint64_t ctl_key_hash(const char *key);

/* ctl_shard_pick - nonzero when object @key belongs to shard @k of @n:
 * ctl_key_hash(key) % n == k.  Every key is in exactly one shard. */
int ctl_shard_pick(const char *key, unsigned k, unsigned n);

/* ctl_format_bytes - "0 B", "512 B", "1.5 KiB" ... "2.0 TiB" into @buf. */
void ctl_format_bytes(uint64_t bytes, char *buf, size_t cap);

/* One file found under the paths given to a command. */
struct ctl_file {
	char *path;    /* as reachable from here; owned */
	char *key;     /* object key (shard input, messages); owned */
	uint64_t size; /* st_size */
};

/* The files of a command, sorted by key, each key once. */
struct ctl_files {
	struct ctl_file *v;
	size_t n, cap;
};

/*
 * ctl_collect - every regular file at or under @paths (files or
 * directories of a hoardfs mount).  A path that does not exist or is not
 * on a hoardfs mount (no user.hoardfs.key attribute) is refused: one line
 * naming it in @err and -ENOENT / -ENOTSUP; a directory that cannot be
 * read gives -errno.  Returns 0 with @out filled (free with
 * ctl_files_free()), or -errno.
 */
int ctl_collect(const char *const *paths, size_t npaths, struct ctl_files *out,
		char *err, size_t errlen) __attribute__((warn_unused_result));

/* ctl_check_path - the object key of hoardfs path @path into @key (@cap
 * bytes); 0, or -errno with a line in @err (see ctl_collect). */
int ctl_check_path(const char *path, char *key, size_t cap, char *err,
		   size_t errlen);

void ctl_files_free(struct ctl_files *f);

/* ctl_warm - run `hoardfs warm` for parsed @a; returns the exit status. */
int ctl_warm(const struct ctl_args *a);

#endif
