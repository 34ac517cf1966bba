#!/usr/bin/env python3
"""Debug info from a debuginfod server, and servers that misbehave.

A fixture program is built with -g -O2, its DWARF split off with objcopy
(--only-keep-debug) and removed from the binary (strip -g, no debuglink), so
only a debuginfod server can supply file:line. The program runs under
jemalloc to make a real heap dump. A real HTTP server on loopback (this
script, http.server in a thread) then plays, in turn: a good debuginfod, a
server that is down, one that stalls, one that answers garbage, one that
answers another file's debug info, one that fails with 500; and the on-disk
cache must answer once the good server is gone. The symbolizer must never
hang or use a wrong file, and must say what went wrong.
"""
import argparse
import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
failures = []

SRC = r"""
#include <stdlib.h>
void *keep[4096];
int nkeep;
static inline void *remember(void *p) { keep[nkeep++] = p; return p; }
__attribute__((noinline)) void make_blocks(int n) {
    for (int i = 0; i < n; i++) remember(malloc(1000 + i));
}
int main(void) { make_blocks(500); return 0; }
"""


def check(cond, msg):
    if cond:
        print("ok: " + msg)
    else:
        failures.append(msg)
        print("FAIL: " + msg)


class Handler(http.server.BaseHTTPRequestHandler):
    mode = "good"
    files = {}  # build-id -> bytes
    other = b""
    hits = 0

    def log_message(self, *a):
        pass

    def do_GET(self):
        Handler.hits += 1
        parts = self.path.strip("/").split("/")
        mode = Handler.mode
        if mode == "token" and not (self.headers.get("Authorization") == "Bearer s3cret" or
                                    self.headers.get("X-Api-Key") == "k3y"):
            self.send_response(401)
            self.end_headers()
            return
        if mode == "slow":
            time.sleep(8)
        if mode == "error":
            self.send_response(500)
            self.end_headers()
            return
        if len(parts) != 3 or parts[0] != "buildid" or parts[2] not in ("debuginfo", "executable"):
            self.send_response(404)
            self.end_headers()
            return
        body = Handler.files.get(parts[1]) if parts[2] == "debuginfo" else None
        if mode == "garbage":
            body = os.urandom(70000)
        elif mode == "wrong":
            body = Handler.other
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE, text=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split()[-1]
    return None


def symtool(args, tool, heap, url, cache, timeout_ms=2000, server=()):
    where = ["--debuginfod", url] if not server else ["--server", url, *server]
    cmd = [tool, "heap", "--addresses", "--stats", "--no-system-debug", *where,
           "--cache-dir", cache, "--timeout-ms", str(timeout_ms), heap]
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    return r, time.monotonic() - t0


def fixture_lines(out, binary):
    return [l for l in out.splitlines() if l.startswith(binary + "\t")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--symtool", required=True)
    args = ap.parse_args()
    for t in ("gcc", "objcopy", "strip", "readelf"):
        if not shutil.which(t):
            print("skip: %s not installed" % t)
            return SKIP
    if not os.path.exists(JEMALLOC):
        print("skip: %s not installed" % JEMALLOC)
        return SKIP
    work = tempfile.mkdtemp(prefix="hf-sym-dbgd-")
    server = None
    try:
        src = os.path.join(work, "fx.c")
        with open(src, "w") as f:
            f.write(SRC)
        full = os.path.join(work, "full")
        binary = os.path.join(work, "fx")
        subprocess.run(["gcc", "-g", "-O2", "-o", full, src], check=True)
        subprocess.run(["objcopy", "--only-keep-debug", full, full + ".debug"], check=True)
        subprocess.run(["strip", "-g", "-o", binary, full], check=True)
        bid = build_id(binary)
        check(bid is not None and bid == build_id(full + ".debug"), "fixture has a build-id")
        with open(full + ".debug", "rb") as f:
            Handler.files[bid] = f.read()
        # "another file's debug info": a second program's
        other = os.path.join(work, "other")
        with open(src + "2.c", "w") as f:
            f.write(SRC.replace("1000", "2000"))
        subprocess.run(["gcc", "-g", "-O2", "-o", other, src + "2.c"], check=True)
        with open(other, "rb") as f:
            Handler.other = f.read()

        env = dict(os.environ, LD_PRELOAD=JEMALLOC,
                   MALLOC_CONF="prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:" +
                   os.path.join(work, "fx"))
        subprocess.run([binary], env=env, check=True)
        heap = [os.path.join(work, f) for f in os.listdir(work) if f.endswith(".heap")][0]

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        url = "http://127.0.0.1:%d" % server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()

        # A server that wants a token: refused without it (and said so),
        # named with a bearer token or with a header file.
        Handler.mode = "token"
        r, dt = symtool(args, args.symtool, heap, url, os.path.join(work, "cache-notoken"),
                        server=["--server-token", "wrong"])
        check("401" in r.stderr and "token refused" in r.stderr,
              "token server, wrong token: 401 reported as a refused token")
        check(all("??:0" in l for l in fixture_lines(r.stdout, binary)),
              "token server, wrong token: nothing named")
        r, dt = symtool(args, args.symtool, heap, url, os.path.join(work, "cache-token"),
                        server=["--server-token", "s3cret"])
        check(any("make_blocks" in l and "??:0" not in l for l in fixture_lines(r.stdout, binary)),
              "token server, bearer token: file:line from its debug info")
        hdr = os.path.join(work, "headers")
        with open(hdr, "w") as f:
            f.write("# comment\nX-Api-Key: k3y\n")
        r, dt = symtool(args, args.symtool, heap, url, os.path.join(work, "cache-hdr"),
                        server=["--server-header-file", hdr])
        check(any("make_blocks" in l and "??:0" not in l for l in fixture_lines(r.stdout, binary)),
              "token server, header file: file:line from its debug info")

        # Misbehaving servers first, each with a fresh cache.
        Handler.mode = "garbage"
        cache = os.path.join(work, "cache-garbage")
        r, dt = symtool(args, args.symtool, heap, url, cache)
        lines = fixture_lines(r.stdout, binary)
        check(r.returncode == 0 and lines and all("??:0" in l for l in lines),
              "garbage answer: frames keep symbol names only (%d lines)" % len(lines))
        check("not a usable ELF" in r.stderr, "garbage answer: reported")
        check(not os.path.exists(os.path.join(cache, bid, "debuginfo")), "garbage not cached")

        Handler.mode = "wrong"
        r, dt = symtool(args, args.symtool, heap, url, os.path.join(work, "cache-wrong"))
        check("expected " + bid in r.stderr, "another file's debug info: build-id mismatch reported")
        check(all("??:0" in l for l in fixture_lines(r.stdout, binary)),
              "another file's debug info: not used")

        Handler.mode = "error"
        r, dt = symtool(args, args.symtool, heap, url, os.path.join(work, "cache-500"))
        check("HTTP status 500" in r.stderr, "HTTP 500: reported")

        Handler.mode = "slow"
        r, dt = symtool(args, args.symtool, heap, url, os.path.join(work, "cache-slow"),
                        timeout_ms=1000)
        check(r.returncode == 0 and dt < 6, "stalled server: gave up after %.1fs" % dt)
        check("timed out" in r.stderr.lower() or "timeout" in r.stderr.lower(),
              "stalled server: timeout reported")

        # Down: a port nobody listens on.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = "http://127.0.0.1:%d" % s.getsockname()[1]
        s.close()
        r, dt = symtool(args, args.symtool, heap, dead, os.path.join(work, "cache-down"))
        check(r.returncode == 0 and dt < 5, "server down: returned in %.1fs" % dt)
        check(dead in r.stderr, "server down: reported with its URL")

        # Good server: file:line arrive, and the cache is filled.
        Handler.mode = "good"
        cache = os.path.join(work, "cache")
        r, dt = symtool(args, args.symtool, heap, url, cache)
        lines = fixture_lines(r.stdout, binary)
        good = [l for l in lines if "make_blocks@" in l and "fx.c:" in l]
        check(r.returncode == 0 and good, "good server: make_blocks resolved to fx.c:N")
        check(os.path.exists(os.path.join(cache, bid, "debuginfo")), "good server: cached")

        # Server gone: the cache answers.
        server.shutdown()
        server.server_close()
        server = None
        hits = Handler.hits
        r, dt = symtool(args, args.symtool, heap, url, cache)
        lines2 = fixture_lines(r.stdout, binary)
        check(lines2 == lines, "cache answers with the server gone (%d lines)" % len(lines2))
        check(Handler.hits == hits, "no request made when cached")
    finally:
        if server:
            server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
