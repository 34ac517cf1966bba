#!/usr/bin/env python3
"""Downloads of big binaries resume after an interruption (issue 15).

A 64 MiB ELF (the fixture with its section header table moved to the end of
a sparse copy, as bigfetch_test.py makes its 2 GiB one) is fetched with
`symtool fetch` (the symbolizer's fetcher) from real HTTP servers on
loopback:
  cut:     the first answer stops half way (the connection closed); the
           fetcher asks for the rest (Range: bytes=HALF-) and gets the file
           whole, having been sent its size once;
  ignore:  the same cut, but the server ignores Range and sends 200 with the
           whole file: the fetcher starts again from zero;
  bad:     a part file of garbage is in the cache; resuming onto it gives a
           file that fails the build-id check: again from zero;
  cap:     a stale part file counts against the cache's bound;
  agent:   the real agent serves a copy that differs in its first half from
           the original; with the original's first half as the part file,
           the result is the original: the agent sent only the rest.
Every result must be the original byte for byte.
"""
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bigfetch_test  # noqa: E402  (parse_args, make_big_elf, start_agent)

SKIP = 77
SIZE = 64 << 20
bigfetch_test.SIZE = SIZE
failures = []


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "cut"
    data = b""
    log = []  # (range header or None, status, bytes sent)

    def log_message(self, *a):
        pass

    def do_GET(self):
        rng = self.headers.get("Range")
        data = Handler.data
        first = 0
        m = re.fullmatch(r"bytes=(\d+)-", rng or "")
        honour = m and Handler.mode != "ignore"
        cut = Handler.mode in ("cut", "ignore") and not any(e[0] is None for e in Handler.log)
        if honour:
            first = int(m.group(1))
            if first >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                Handler.log.append((rng, 416, 0))
                return
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (first, len(data) - 1, len(data)))
        else:
            self.send_response(200)
        body = data[first:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        n = len(body) // 2 if cut else len(body)
        sent = 0
        try:
            while sent < n:
                k = min(1 << 20, n - sent)
                self.wfile.write(body[sent:sent + k])
                sent += k
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        Handler.log.append((rng, 206 if honour else 200, sent))
        if cut:
            self.close_connection = True
            self.connection.shutdown(2)


def fetch(symtool, url, cache, bid, cache_max=None):
    extra = ["--cache-max", str(cache_max)] if cache_max else []
    p = subprocess.run([symtool, "fetch", "--server", url, "--cache-dir", cache, *extra, bid,
                        "executable"], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout.strip(), p.stderr


def same_file(path, data):
    try:
        with open(path, "rb") as f:
            return f.read() == data
    except OSError:
        return False


def main():
    args = bigfetch_test.parse_args()
    if args is None:
        return SKIP
    tmp = tempfile.mkdtemp(prefix="hf-resume-")
    srv = agent = None
    try:
        big = os.path.join(tmp, "big_be")
        bigfetch_test.make_big_elf(args.fixture, big)
        out = subprocess.run(["readelf", "-n", big], capture_output=True, text=True).stdout
        bid = re.search(r"Build ID: ([0-9a-f]+)", out).group(1)
        with open(big, "rb") as f:
            Handler.data = f.read()
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = "http://127.0.0.1:%d" % srv.server_address[1]
        half = SIZE // 2

        for mode in ("cut", "ignore", "bad"):
            Handler.mode = mode if mode != "bad" else "range"
            Handler.log = []
            cache = os.path.join(tmp, "cache-" + mode)
            if mode == "bad":
                os.makedirs(os.path.join(cache, bid))
                with open(os.path.join(cache, bid, "executable.part"), "wb") as f:
                    f.write(b"\xab" * (1 << 20))
            rc, path, err = fetch(args.symtool, url, cache, bid)
            check(rc == 0, "%s: fetched (%s)" % (mode, err.strip() or "no error"))
            check(rc == 0 and same_file(path, Handler.data), "%s: the file is the original" % mode)
            ranges = [e[0] for e in Handler.log]
            print("   requests: %s" % [(e[0], e[1], e[2]) for e in Handler.log])
            if mode == "cut":
                check(ranges == [None, "bytes=%d-" % half],
                      "cut: the rest asked for with Range: bytes=%d-" % half)
                check(sum(e[2] for e in Handler.log) == SIZE,
                      "cut: %d bytes sent in all, the file's size once" %
                      sum(e[2] for e in Handler.log))
            elif mode == "ignore":
                check(len(ranges) == 3 and ranges[1] == "bytes=%d-" % half and ranges[2] is None,
                      "ignore: Range ignored (200), then again from zero")
            else:
                check(ranges == ["bytes=%d-" % (1 << 20), None],
                      "bad: resumed onto the garbage part file, then again from zero")
            check(not os.path.exists(os.path.join(cache, bid, "executable.part")),
                  "%s: no part file left behind" % mode)

        # A part file nobody resumes (its server gone) counts against the
        # cache's bound like any file, oldest first.
        Handler.mode = "range"
        cache = os.path.join(tmp, "cache-cap")
        stale = os.path.join(cache, "00" * 20, "executable.part")
        os.makedirs(os.path.dirname(stale))
        with open(stale, "wb") as f:
            f.write(b"\0" * (8 << 20))
        os.utime(stale, (time.time() - 86400, time.time() - 86400))
        rc, path, err = fetch(args.symtool, url, cache, bid, cache_max=SIZE + (1 << 20))
        check(rc == 0 and same_file(path, Handler.data), "cap: fetched (%s)" % err.strip())
        check(not os.path.exists(stale), "cap: the stale part file was removed to fit the bound")

        # The real agent: its copy differs in the first half (a byte in the
        # sparse hole), so only a Range answer can give back the original.
        bins = os.path.join(tmp, "bin")
        os.makedirs(bins)
        served = bytearray(Handler.data)
        served[SIZE // 4] ^= 0xFF
        with open(os.path.join(bins, "big_be"), "wb") as f:
            f.write(served)
        os.chmod(os.path.join(bins, "big_be"), 0o755)
        dumps = os.path.join(tmp, "dumps")
        os.makedirs(dumps)
        agent, port = bigfetch_test.start_agent(args.agent, tmp, dumps, bins)
        if port is None:
            check(False, "agent started")
        else:
            cache = os.path.join(tmp, "cache-agent")
            os.makedirs(os.path.join(cache, bid))
            with open(os.path.join(cache, bid, "executable.part"), "wb") as f:
                f.write(Handler.data[:half])
            rc, path, err = fetch(args.symtool, "http://127.0.0.1:" + port, cache, bid)
            check(rc == 0, "agent: fetched (%s)" % (err.strip() or "no error"))
            check(rc == 0 and same_file(path, Handler.data),
                  "agent: resumed at byte %d (the original's first half kept)" % half)
    finally:
        if srv:
            srv.shutdown()
        if agent:
            agent.kill()
            agent.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
