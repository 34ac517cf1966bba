#!/usr/bin/env python3
"""A 2 GiB binary fetched from a node's agent without holding it in memory
(issue 15).

The fixture program is made 2 GiB long without using 2 GiB of disk: its
section header table is moved to offset 2 GiB of a sparse copy (a valid ELF
with the same build-id, as libelf and readelf read it). The real agent
serves it (--binaries, token required); `symtool fetch` downloads it
through the symbolizer's fetcher into a fresh cache. The download must
arrive whole, pass the build-id check, and the fetching process's peak RSS
(getrusage of the child) must stay far below the file's size.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77
SIZE = 2 << 30
RSS_LIMIT_KB = 64 * 1024


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def make_big_elf(src, dst):
    with open(src, "rb") as f:
        data = bytearray(f.read())
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        fail("fixture is not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    table = bytes(data[shoff:shoff + shentsize * shnum])
    newoff = SIZE - len(table)
    struct.pack_into("<Q", data, 0x28, newoff)
    with open(dst, "wb") as f:
        f.write(data)
        f.seek(newoff)
        f.write(table)
    os.chmod(dst, 0o755)


def start_agent(agent, tmp, dumps, bins, extra=()):
    """The real agent on a free loopback port, serving --binaries bins;
    (process, port), port None when it did not start within 20 s."""
    log = open(os.path.join(tmp, "agent.log"), "w+")
    proc = subprocess.Popen([agent, "--dumps", dumps, "--binaries", bins, "--listen",
                             "127.0.0.1:0", *extra], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        log.seek(0)
        m = re.search(r"addr=127\.0\.0\.1:(\d+).*listening", log.read())
        if m:
            return proc, m.group(1)
        time.sleep(0.05)
    return proc, None


def parse_args():
    """--symtool, --agent and --fixture; None (after saying so) when
    readelf, which the fetch tests check build-ids with, is missing."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--symtool", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--fixture", required=True)
    args = ap.parse_args()
    if not shutil.which("readelf"):
        print("SKIP: readelf not installed")
        return None
    return args


def main():
    args = parse_args()
    if args is None:
        return SKIP
    tmp = tempfile.mkdtemp(prefix="hf-bigfetch-")
    agent = None
    try:
        bins = os.path.join(tmp, "bin")
        dumps = os.path.join(tmp, "dumps")
        cache = os.path.join(tmp, "cache")
        os.makedirs(bins)
        os.makedirs(dumps)
        big = os.path.join(bins, "big_be")
        make_big_elf(args.fixture, big)
        st = os.stat(big)
        print("ok: %s is %d bytes, %d allocated on disk" % (big, st.st_size, st.st_blocks * 512))
        out = subprocess.run(["readelf", "-n", big], capture_output=True, text=True).stdout
        m = re.search(r"Build ID: ([0-9a-f]+)", out)
        if not m:
            fail("readelf does not read the 2 GiB ELF's build-id")
        bid = m.group(1)
        with open(os.path.join(tmp, "token"), "w") as f:
            f.write("big-%d\n" % os.getpid())
        agent, port = start_agent(args.agent, tmp, dumps, bins,
                                  ("--token-file", os.path.join(tmp, "token")))
        if port is None:
            fail("agent did not start")
        cmd = [args.symtool, "fetch", "--server", "http://127.0.0.1:%s" % port,
               "--server-token", "big-%d" % os.getpid(), "--cache-dir", cache, bid, "executable"]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        dt = time.monotonic() - t0
        stdout, stderr = p.stdout.read().decode(), p.stderr.read().decode()
        if os.waitstatus_to_exitcode(status) != 0:
            fail("fetch failed: " + stderr)
        path = stdout.strip()
        got = os.stat(path).st_size
        print("ok: fetched %d bytes in %.1f s; peak RSS of the fetcher %d KiB" %
              (got, dt, ru.ru_maxrss))
        if got != SIZE:
            fail("cached file has %d bytes, expected %d" % (got, SIZE))
        if ru.ru_maxrss > RSS_LIMIT_KB:
            fail("peak RSS %d KiB for a %d byte download (limit %d KiB)" %
                 (ru.ru_maxrss, SIZE, RSS_LIMIT_KB))
        out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
        if bid not in out:
            fail("the cached file lost its build-id")
        print("ok: 2 GiB download streamed to disk, build-id %s checked" % bid)
        return 0
    finally:
        if agent:
            agent.kill()
            agent.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
