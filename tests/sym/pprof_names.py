#!/usr/bin/env python3
"""pprof files that carry function names keep them (issue 11).

Go, Node.js, Pyroscope, Parca and jemalloc_pprof write Function names into
their pprof files. The symbolizer used to wipe them when the binary was not
found, so `query top` printed `0x0000000000000000` or `0x4b3d46 goheap`
where `go tool pprof -top` prints `main.newSegment`. Two files, no binaries
for either:

  tests/data/go-heap.pb.gz   written by Go's runtime/pprof (addresses and a
                             mapping whose file is not on this machine)
  zero-address.pb            written here: every location at address 0,
                             different functions (as name-only exporters
                             write them); they must never merge

For each, every function's cumulative bytes from `query top --format
collapsed` must equal `go tool pprof -top -unit=B` within 0.1% (and, for
the file written here, the figures that follow from its samples).
"""
import argparse
import collections
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """Length-delimited field (wire type 2)."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def uint(num, v):
    return varint(num << 3) + varint(v)


def zero_address_profile():
    """Sample values are chosen so that every function's total is distinct."""
    strings = ["", "inuse_space", "bytes", "tree.newNode", "tree.insert", "main.main",
               "cache.fill", "tree.go", "main.go"]
    s = {x: i for i, x in enumerate(strings)}
    funcs = [(1, "tree.newNode", "tree.go"), (2, "tree.insert", "tree.go"),
             (3, "main.main", "main.go"), (4, "cache.fill", "main.go")]
    locs = [(1, 1, 12), (2, 2, 30), (3, 3, 7), (4, 4, 50)]  # id, function, line
    samples = [([1, 2, 3], 4096), ([4, 3], 1024), ([1, 4, 3], 512), ([3], 64)]
    out = field(1, uint(1, s["inuse_space"]) + uint(2, s["bytes"]))
    for stack, v in samples:
        out += field(2, field(1, b"".join(varint(x) for x in stack)) + field(2, varint(v)))
    for lid, fid, line in locs:
        out += field(4, uint(1, lid) + field(4, uint(1, fid) + uint(2, line)))
    for fid, name, file in funcs:
        out += field(5, uint(1, fid) + uint(2, s[name]) + uint(3, s[name]) + uint(4, s[file]))
    for x in strings:
        out += field(6, x.encode())
    cum = collections.Counter()
    for stack, v in samples:
        for n in {funcs[locs[i - 1][1] - 1][1] for i in stack}:
            cum[n] += v
    return out, cum


def ours_cum(query, path):
    r = subprocess.run([query, "top", "--format", "collapsed", path], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("query top %s failed: %s" % (path, r.stderr))
    cum = collections.Counter()
    for line in r.stdout.splitlines():
        stack, _, v = line.rstrip().rpartition(" ")
        for n in set(stack.split(";")):
            cum[n] += int(float(v))
    return cum, r.stdout


def go_cum(path):
    r = subprocess.run(["go", "tool", "pprof", "-top", "-unit=B", "-nodefraction=0",
                        "-sample_index=inuse_space", path], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PPROF_BINARY_PATH="/nonexistent"))
    if r.returncode != 0:
        raise RuntimeError("go tool pprof failed: %s" % r.stderr)
    cum = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*(\d+)B\s+[\d.]+%\s+[\d.]+%\s+(\d+)B\s+[\d.]+%\s+(.*)$", line)
        if m:
            cum[m.group(3).replace(" (inline)", "").strip()] = int(m.group(2))
    return cum


def close(a, b):
    return abs(a - b) <= max(1, 0.001 * max(a, b))


def compare(label, ours, theirs, out):
    bad = 0
    if any(n.startswith("0x") for n in ours):
        print("%s: raw addresses in the output:\n%s" % (label, out))
        bad += 1
    for n, v in sorted(theirs.items()):
        if not close(ours.get(n, 0), v):
            print("%s: %s: cum %d, expected %d" % (label, n, ours.get(n, 0), v))
            bad += 1
    if not theirs:
        print("%s: nothing to compare" % label)
        bad += 1
    if not bad:
        print("ok %s: %d functions, names and cumulative bytes as expected" % (label, len(theirs)))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--query", required=True)
    ap.add_argument("--data", required=True)
    a = ap.parse_args()
    have_go = shutil.which("go") is not None
    if not have_go:
        print("note: go not installed; the written file is checked against its own figures only")
    work = tempfile.mkdtemp(prefix="hf-pprof-names.")
    bad = 0
    try:
        env_home = os.path.join(work, "home")  # go tool pprof writes under $HOME/pprof
        os.makedirs(env_home)
        os.environ["HOME"] = env_home
        os.environ.setdefault("GOCACHE", os.path.join(work, "gocache"))
        zpath = os.path.join(work, "zero-address.pb.gz")
        data, expect = zero_address_profile()
        with gzip.open(zpath, "wb") as f:
            f.write(data)
        ours, out = ours_cum(a.query, zpath)
        bad += compare("zero-address (figures of the file)", ours, expect, out)
        if have_go:
            bad += compare("zero-address (go tool pprof)", ours, go_cum(zpath), out)
            gpath = os.path.join(a.data, "go-heap.pb.gz")
            ours, out = ours_cum(a.query, gpath)
            bad += compare("go-heap.pb.gz (go tool pprof)", ours, go_cum(gpath), out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
