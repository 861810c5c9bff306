# SPDX-License-Identifier: MIT
"""The documentation keeps up with the binary: every option `hoardfs --help`
names is in man/hoardfs.1, and every man page formats without a groff or
man warning."""
import glob
import os
import re
import subprocess

import pytest

from conftest import HOARDFS, REPO

PAGES = sorted(glob.glob(os.path.join(REPO, "man", "*.[0-9]")))


def help_text():
    r = subprocess.run([HOARDFS, "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def roff(word):
    """@word as man/hoardfs.1 writes it: every '-' escaped as '\\-'."""
    return word.replace("-", r"\-")


def man_source():
    with open(os.path.join(REPO, "man", "hoardfs.1")) as f:
        return f.read()


def test_pages_exist():
    names = [os.path.basename(p) for p in PAGES]
    assert "hoardfs.1" in names and "mount.fuse.hoardfs.8" in names


def test_every_long_option_of_help_is_in_the_man_page():
    longs = sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*",
                                  help_text())))
    assert len(longs) >= 15, longs  # the extraction itself works
    src = man_source()
    missing = [o for o in longs
               if not re.search(re.escape(roff(o)) + r"(?![a-z0-9\\-])", src)]
    assert not missing, "options in --help but not in man/hoardfs.1: %s" % (
        missing)


def test_every_short_option_and_mount_option_of_help_is_in_the_man_page():
    text = help_text()
    shorts = sorted(set(re.findall(r"^\s+(-[a-zA-Z])\b", text, re.M)))
    assert {"-f", "-d", "-o", "-h", "-V"} <= set(shorts), shorts
    # FUSE mount options that --help names inside the -o entry.
    block = text[text.index("-o OPT"):text.index("-h, --help")]
    fuse_words = re.findall(r"\b(allow_\w+|default_\w+|auto_\w+|max_\w+|"
                            r"no\w+)\b", block)
    assert "allow_other" in fuse_words
    src = man_source()
    missing = [w for w in shorts if ".BR %s" % roff(w) not in src and
               ".BI %s" % roff(w) not in src]
    missing += [w for w in fuse_words if w not in src]
    assert not missing, missing


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_groff_has_no_warnings(page):
    r = subprocess.run(["groff", "-ww", "-man", "-Tutf8", page],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_man_renders_without_warnings(page):
    r = subprocess.run(["man", "--warnings", "-l", page],
                       capture_output=True, text=True,
                       env=dict(os.environ, MANWIDTH="80", MAN_KEEP_STDERR="1"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "SYNOPSIS" in r.stdout


def test_documented_subcommands_exist():
    """The man page documents no subcommand the binary lacks."""
    src = man_source()
    for sub in ("warm", "status", "evict"):
        if re.search(r"^\.B hoardfs %s\b" % sub, src, re.M):
            r = subprocess.run([HOARDFS, sub, "--help"],
                               capture_output=True, text=True)
            assert r.returncode == 0, "man page documents '%s'" % sub
