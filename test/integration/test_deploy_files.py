# SPDX-License-Identifier: MIT
"""The deployment examples are well formed: every Kubernetes YAML file
under docs/ parses and has the structure docs/k8s/README.md describes, every
hoardfs command line in them (and in the systemd units) passes hoardfs's
own option parser, the systemd units pass systemd-analyze, and the
Dockerfile's runtime stage installs the package of every shared library the
binary needs."""
import glob
import os
import re
import shlex
import shutil
import subprocess

import pytest
import yaml

from conftest import HOARDFS, REPO

YAML_FILES = sorted(glob.glob(os.path.join(REPO, "docs", "**", "*.y*ml"),
                              recursive=True))
UNITS = sorted(glob.glob(os.path.join(REPO, "scripts", "systemd", "*")))
API = {"Pod": "v1", "Secret": "v1", "ConfigMap": "v1",
       "DaemonSet": "apps/v1", "Deployment": "apps/v1", "Job": "batch/v1"}


def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def pod_spec(doc):
    return doc["spec"] if doc["kind"] == "Pod" else \
        doc["spec"]["template"]["spec"]


def all_containers(spec):
    return spec.get("initContainers", []) + spec["containers"]


def hoardfs_argv(c):
    """The hoardfs command line a container runs, as a list, or None."""
    if "hoardfs" not in c["image"]:
        return None
    argv = c.get("command", []) + c.get("args", [])
    if argv[:2] == ["/bin/sh", "-c"]:
        script = " ".join(argv[2:])
        assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0
        exec_part = script[script.index("exec hoardfs"):]
        return shlex.split(exec_part)[1:]
    return ["hoardfs"] + argv  # the image's entrypoint is hoardfs


def parse_ok(args):
    """hoardfs parses every option before acting on --help, so
    `hoardfs ARGS --help` exits 0 exactly when ARGS are all valid."""
    r = subprocess.run([HOARDFS] + args + ["--help"], capture_output=True,
                       text=True)
    return r.returncode == 0, r.stderr


def test_there_are_examples():
    names = [os.path.basename(p) for p in YAML_FILES]
    assert "training-pod-sidecar.yaml" in names and "daemonset.yaml" in names


@pytest.mark.parametrize("path", YAML_FILES, ids=os.path.basename)
def test_kubernetes_structure(path):
    for doc in docs(path):
        kind = doc.get("kind")
        assert kind in API, "unknown kind %r" % kind
        assert doc.get("apiVersion") == API[kind], kind
        assert doc.get("metadata", {}).get("name"), kind
        if kind in ("Secret", "ConfigMap"):
            continue
        spec = pod_spec(doc)
        if kind != "Pod":
            labels = doc["spec"]["template"]["metadata"]["labels"]
            selector = doc["spec"]["selector"]["matchLabels"]
            assert selector.items() <= labels.items()
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in all_containers(spec):
            assert c.get("name") and c.get("image"), c
            assert re.search(r":[\w.-]+$", c["image"]), \
                "image %s has no tag" % c["image"]
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes, m["name"]
                prop = m.get("mountPropagation", "None")
                assert prop in ("None", "HostToContainer", "Bidirectional")
                if prop == "Bidirectional":
                    # Kubernetes refuses it in unprivileged containers.
                    assert c.get("securityContext", {}).get("privileged")


@pytest.mark.parametrize("path", YAML_FILES, ids=os.path.basename)
def test_hoardfs_shares_its_mount_and_others_follow_it(path):
    """The hoardfs container mounts with Bidirectional propagation in the
    foreground, caches on a hostPath, and every other container reading
    that volume follows it with HostToContainer (or is in another pod that
    reads the host path)."""
    for doc in docs(path):
        if doc["kind"] in ("Secret", "ConfigMap"):
            continue
        spec = pod_spec(doc)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        shared = set()
        for c in all_containers(spec):
            argv = hoardfs_argv(c)
            if argv is None:
                continue
            assert "-f" in argv or "--foreground" in argv, \
                "hoardfs would daemonize and end its container"
            assert c["securityContext"]["privileged"] is True
            ok, err = parse_ok(argv[1:])
            assert ok, "%s: %s" % (c["name"], err)
            mountpoint = argv[-1]
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            holder = [m for p, m in mounts.items()
                      if mountpoint == p or mountpoint.startswith(p + "/")]
            assert holder and holder[0]["mountPropagation"] == \
                "Bidirectional", mountpoint
            shared.add(holder[0]["name"])
            cache = argv[argv.index("--cache-dir") + 1]
            cache_mount = [m for p, m in mounts.items()
                           if cache.startswith(p + "/")]
            assert cache_mount and "hostPath" in \
                volumes[cache_mount[0]["name"]], cache
        readers = [c for c in all_containers(spec)
                   if hoardfs_argv(c) is None]
        for c in readers:
            for m in c.get("volumeMounts", []):
                v = volumes[m["name"]]
                if m["name"] in shared or (
                        "hostPath" in v and
                        v["hostPath"]["path"].startswith("/mnt/hoardfs")):
                    assert m.get("mountPropagation") == "HostToContainer", \
                        "%s reads %s" % (c["name"], m["name"])
                    assert not c.get("securityContext", {}).get("privileged")
        if doc["kind"] == "Pod" and readers and not shared:
            # A reader of a node's mount: it must find one.
            assert any(m.get("mountPropagation") == "HostToContainer"
                       for c in readers for m in c.get("volumeMounts", []))


def unit_options(path):
    with open(path) as f:
        for line in f:
            if line.startswith("Options="):
                return line.strip().split("=", 1)[1]
    return None


def test_systemd_mount_options_parse():
    units = [u for u in UNITS if u.endswith(".mount")]
    assert units
    for u in units:
        opts = unit_options(u)
        ok, err = parse_ok(["-o", opts])
        assert ok, "%s: %s" % (os.path.basename(u), err)


def test_systemd_units_verify():
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd is not installed")
    r = subprocess.run(["systemd-analyze", "verify", "--man=no"] + UNITS,
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr


def package_of(path):
    """The Debian package that ships the library at @path."""
    for p in (path, os.path.realpath(path)):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0]
    raise AssertionError("no package ships %s" % path)


def test_dockerfile_runtime_has_every_library():
    with open(os.path.join(REPO, "Dockerfile")) as f:
        text = f.read()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert stages[0].startswith("debian:bookworm")
    runtime = stages[-1]
    assert runtime.startswith("debian:bookworm")
    assert 'ENTRYPOINT ["/usr/bin/hoardfs"]' in runtime
    installed = set(re.findall(r"[a-z0-9][a-z0-9.+-]+",
                               runtime[runtime.index("apt-get install"):
                                       runtime.index("rm -rf")]))
    r = subprocess.run(["readelf", "-d", HOARDFS], capture_output=True,
                       text=True)
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]", r.stdout)
    assert "libfuse3.so.3" in needed
    r = subprocess.run(["ldd", HOARDFS], capture_output=True, text=True)
    where = dict(re.findall(r"^\s*(\S+) => (/\S+)", r.stdout, re.M))
    missing = []
    for so in needed:
        pkg = package_of(where[so])
        # libc6 is in every image; sanitizer runtimes only in test builds.
        if pkg in ("libc6", "libasan8", "libubsan1", "libgcc-s1",
                   "libstdc++6"):
            continue
        if pkg not in installed:
            missing.append("%s (%s)" % (pkg, so))
    assert not missing, "Dockerfile runtime stage lacks: %s" % missing
    assert "ca-certificates" in installed and "fuse3" in installed
