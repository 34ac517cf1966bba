#!/usr/bin/env python3
"""Names from a BE's own /pprof/symbol when no binary is reachable (issue 15).

A jemalloc fixture runs from a folder of its own and writes a real dump. A
fake StarRocks BE on loopback (http.server in this script) serves that dump
at /pprof/heap and gperftools' symbol service at /pprof/symbol: GET reports
num_symbols, POST "0xA+0xB..." answers "0xADDR name" lines, named from the
fixture's own symbol table (nm) and the dump's maps, as the BE would. The
collector and query run in a mount namespace where the fixture's folder is
an empty tmpfs, with no agent and no debuginfod, so only the symbol service
can name the program's frames. They must be named, marked names-only in the
outputs (text and JSON), carry no file:line, and the service must have been
asked. Without the service (a node whose /pprof/symbol answers 404) the
frames stay addresses.
"""
import argparse
import bisect
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

SKIP = 77
failures = []


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


class BE(http.server.BaseHTTPRequestHandler):
    dump = b""
    syms = []      # sorted (vaddr, name)
    maps = []      # (start, end, offset) of the program's mappings
    posts = 0
    symbol_404 = False

    def log_message(self, *a):
        pass

    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/pprof/heap"):
            return self.reply(200, BE.dump)
        if self.path == "/pprof/symbol" and not BE.symbol_404:
            return self.reply(200, b"num_symbols: %d\n" % len(BE.syms))
        return self.reply(404, b"not found\n")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n).decode()
        if self.path != "/pprof/symbol" or BE.symbol_404:
            return self.reply(404, b"not found\n")
        BE.posts += 1
        out = []
        addrs = [int(a, 16) for a in body.split("+") if a]
        keys = [s[0] for s in BE.syms]
        for a in addrs:
            for start, end, off in BE.maps:
                if start <= a < end:
                    v = a - start + off  # PIE: text p_vaddr == p_offset
                    i = bisect.bisect_right(keys, v) - 1
                    if i >= 0:
                        out.append("0x%x %s" % (a, BE.syms[i][1]))
        self.reply(200, ("\n".join(out) + "\n").encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--collector", required=True)
    ap.add_argument("--query", required=True)
    ap.add_argument("--fixture", required=True)
    args = ap.parse_args()
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        print("SKIP: unshare -m not permitted here")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="hf-pprofsym-")
    try:
        return run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def hidden(tmp, cmd, **kw):
    folder = os.path.join(tmp, "be", "lib")
    return subprocess.run(["unshare", "-m", "sh", "-c", 'mount -t tmpfs none "$0" && exec "$@"',
                           folder] + cmd, capture_output=True, text=True, **kw)


def run(args, tmp):
    lib = os.path.join(tmp, "be", "lib")
    os.makedirs(lib)
    prog = os.path.join(lib, "starrocks_be")
    shutil.copy(args.fixture, prog)
    heap = os.path.join(tmp, "be.heap")
    env = dict(os.environ, MALLOC_CONF="prof:true,lg_prof_sample:0")
    subprocess.run([prog, "--threads", "2", heap], env=env, check=True)
    with open(heap, "rb") as f:
        BE.dump = f.read()
    for line in BE.dump.decode(errors="replace").splitlines():
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+) ([0-9a-f]+) \S+ \d+\s+(\S+)$", line)
        if m and m.group(5) == prog:
            BE.maps.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(4), 16)))
    check(bool(BE.maps), "the dump maps the BE's program")
    nm = subprocess.run(["nm", "--defined-only", prog], capture_output=True, text=True).stdout
    for line in nm.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tTwW":
            BE.syms.append((int(f[0], 16), f[2]))
    BE.syms.sort()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), BE)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    with open(os.path.join(tmp, "be.list"), "w") as f:
        f.write("starrocks 127.0.0.1:%d name=be-1\n" % port)
    env = dict(os.environ, HOME=tmp, DEBUGINFOD_URLS="")
    db = os.path.join(tmp, "hf.db")
    r = hidden(tmp, [args.collector, "--nodes", os.path.join(tmp, "be.list"), "--once", "--db", db,
                     "--listen", "off", "--symbol-cache", os.path.join(tmp, "cache")],
               env=env, timeout=120)
    check(r.returncode == 0, "collector --once stored the BE's dump" +
          ("" if r.returncode == 0 else ": rc=%d " % r.returncode + r.stdout[-1500:] + r.stderr[-1500:]))
    check(BE.posts > 0, "the BE's /pprof/symbol was asked (%d POSTs)" % BE.posts)
    r = hidden(tmp, [args.query, "top", "be-1", "--db", db, "--top", "0"], env=env, timeout=60)
    text = r.stdout
    check("tracked_alloc" in text and "leak_tablet_schema" in text,
          "frames of the absent program are named by the BE")
    check("/pprof/symbol" in text and "names only" in text,
          "the text output says the names came from /pprof/symbol only")
    r = hidden(tmp, [args.query, "top", "be-1", "--db", db, "--top", "0", "--format", "json"],
               env=env, timeout=60)
    check("names only" in r.stdout, "the JSON output says names only")
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = None
    check(doc is not None, "JSON output parses")
    check(".c:" not in text and ".cc:" not in text, "no file:line invented for names-only frames")

    # The same without a symbol service: addresses, nothing invented.
    BE.symbol_404 = True
    with open(os.path.join(tmp, "be2.list"), "w") as f:
        f.write("starrocks 127.0.0.1:%d name=be-2\n" % port)
    r = hidden(tmp, [args.collector, "--nodes", os.path.join(tmp, "be2.list"), "--once", "--db",
                     db, "--listen", "off", "--symbol-cache", os.path.join(tmp, "cache")],
               env=env, timeout=120)
    r = hidden(tmp, [args.query, "top", "be-2", "--db", db, "--top", "0"], env=env, timeout=60)
    check("tracked_alloc" not in r.stdout and "starrocks_be" in r.stdout,
          "without the service the program's frames stay addresses")
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
