#!/usr/bin/env python3
"""The download cache: one download per build-id, and a bound on its size.

Three small programs with distinct build-ids are served by a real HTTP
server on loopback (this script, http.server in a thread) at
/buildid/<id>/executable, counting the requests per path. Through the
symbolizer's fetcher (`symtool fetch`):
  - four threads asking for the same build at once make one download;
  - with a cache bound that holds two of the files, fetching the third
    removes the least recently used one, a cache hit counts as a use, and a
    removed build is downloaded again when asked for.
"""
import argparse
import http.server
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--symtool", required=True)
    args = ap.parse_args()
    for tool in ("cc", "readelf"):
        if not shutil.which(tool):
            print("SKIP: %s not installed" % tool)
            return SKIP
    tmp = tempfile.mkdtemp(prefix="hf-cachebound-")
    try:
        files = {}
        for i in range(3):
            src = os.path.join(tmp, "p%d.c" % i)
            with open(src, "w") as f:
                # distinct code, distinct build-ids; padded to a known size
                f.write("const char pad%d[%d] = {%d};\n" % (i, 20000 + i * 10, i + 1))
                f.write("int main(int c, char **v) { return pad%d[c] + %d; }\n" % (i, i))
            exe = os.path.join(tmp, "p%d" % i)
            subprocess.run(["cc", "-O1", "-Wl,--build-id", "-o", exe, src], check=True)
            bid = build_id(exe)
            if not bid:
                fail("no build-id in %s" % exe)
                return 1
            files[bid] = exe
        ids = list(files)
        hits = {}
        lock = threading.Lock()

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                parts = self.path.strip("/").split("/")
                if len(parts) == 3 and parts[0] == "buildid" and parts[1] in files and \
                        parts[2] == "executable":
                    with lock:
                        hits[parts[1]] = hits.get(parts[1], 0) + 1
                    time.sleep(0.3)  # long enough for the other threads to ask meanwhile
                    data = open(files[parts[1]], "rb").read()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

            def server_bind(self):
                socketserver.TCPServer.server_bind(self)
                self.server_name, self.server_port = self.server_address[:2]

        srv = S(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = "http://127.0.0.1:%d" % srv.server_address[1]
        cache = os.path.join(tmp, "cache")
        sizes = {b: os.path.getsize(p) for b, p in files.items()}
        bound = sizes[ids[0]] + sizes[ids[1]] + sizes[ids[2]] - 1  # two fit, not three

        def fetch(*pairs, threads=1):
            cmd = [args.symtool, "fetch", "--server", url, "--cache-dir", cache,
                   "--cache-max", str(bound), "--threads", str(threads)]
            for b in pairs:
                cmd += [b, "executable"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            if p.returncode != 0:
                fail("symtool fetch %s: %s" % (" ".join(pairs), p.stderr.strip()))

        def cached(b):
            return os.path.exists(os.path.join(cache, b, "executable"))

        fetch(ids[0], threads=4)
        if hits.get(ids[0]) != 1:
            fail("4 threads asking for one build made %s downloads, expected 1" % hits.get(ids[0]))
        time.sleep(0.05)
        fetch(ids[1])
        time.sleep(0.05)
        if not (cached(ids[0]) and cached(ids[1])):
            fail("two builds should fit under the bound")
        fetch(ids[0])  # a hit: ids[0] is now the most recently used
        if hits.get(ids[0]) != 1:
            fail("a cached build was downloaded again")
        time.sleep(0.05)
        fetch(ids[2])  # over the bound: ids[1], the least recently used, goes
        if cached(ids[1]):
            fail("the least recently used build was not removed past the bound")
        if not (cached(ids[0]) and cached(ids[2])):
            fail("the recently used and the new build must stay")
        fetch(ids[1])  # removed builds come back when asked for
        if hits.get(ids[1]) != 2 or not cached(ids[1]):
            fail("a removed build was not downloaded again (%s downloads)" % hits.get(ids[1]))
        total = sum(os.path.getsize(os.path.join(cache, b, "executable"))
                    for b in ids if cached(b))
        if total > bound:
            fail("the cache holds %d bytes, over its bound of %d" % (total, bound))
        srv.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        return 1
    print("ok: one download for 4 concurrent asks; least recently used removed past the bound")
    return 0


if __name__ == "__main__":
    sys.exit(main())
