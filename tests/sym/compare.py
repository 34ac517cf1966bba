#!/usr/bin/env python3
"""Symbolizer versus the real tools, on real jemalloc heap dumps.

Builds the fixture programs in tests/sym/fixtures with -g -O2 (C with inlined
statics and a shared library, C++ with namespaces and templates, Rust with std
in legacy and v0 mangling when rustc is installed), runs each under jemalloc
with profiling of every allocation (lg_prof_sample:0, prof_final:true), then:

  * jeprof --collapsed and jeprof --text --show_bytes on the same binary and
    dump, against `symtool heap --jeprof-compat` (the symbolizer, folded by the
    query library). Every function holding >= 0.5% of the total must agree on
    name and on flat and cumulative bytes within 0.1%, and so must every
    collapsed stack holding >= 0.5%;
  * for every address of the profile inside the fixture's own objects,
    file:line and the whole inline chain against `addr2line -a -f -i -C` and
    `llvm-symbolizer`, without any compatibility mode.

Names are compared the way jeprof prints them in --text (ShortFunctionName,
version suffixes and jeprof's "[inline]" marks removed). Skips (exit 77) with a
printed reason when jemalloc, jeprof or a compiler is missing; a missing
addr2line or llvm-symbolizer skips only its own check.
"""
import argparse
import collections
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repeat import rustc_list  # noqa: E402  (every distinct rustc on the machine)

SKIP = 77
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def short_name(f):
    """jeprof's ShortFunctionName."""
    while True:
        g = re.sub(r"\([^()]*\)(\s*const)?", "", f)
        if g == f:
            break
        f = g
    while True:
        g = re.sub(r"<[^<>]*>", "", f)
        if g == f:
            break
        f = g
    return re.sub(r"^.*\s+(\w+::)", r"\1", f)


RUST_ESC = {"$LT$": "<", "$GT$": ">", "$u7b$": "{", "$u7d$": "}", "$u20$": " ",
            "$C$": ",", "$RF$": "&", "$BP$": "*", "$SP$": "@", "$LP$": "(", "$RP$": ")",
            "$u27$": "'", "$u5b$": "[", "$u5d$": "]", "$u7e$": "~"}


def rust_legacy(f):
    """Finish what a C++-only demangler (llvm-symbolizer 14) leaves of a Rust
    legacy symbol: drop ::h<hash>, undo $..$ escapes."""
    f = re.sub(r" \(\.llvm\.\d+\)$", "", f)
    if not re.search(r"::h[0-9a-f]{16}$", f):
        return f
    f = re.sub(r"::h[0-9a-f]{16}$", "", f)
    f = re.sub(r"(^|::)_\$", r"\1$", f)
    for k, v in RUST_ESC.items():
        f = f.replace(k, v)
    return f.replace("..", "::")


def norm(f):
    """A name as jeprof --text prints it; inlined frames keep a mark, as
    jeprof counts "f" and "f (inline)" separately."""
    inline = f.endswith("[inline]") or f.endswith(" (inline)")
    f = f.replace("[inline]", "").replace(" (inline)", "")
    f = rust_legacy(f)
    f = re.sub(r"@@?[A-Za-z0-9_.]+(<[0-9a-f]+>)?$", r"\1", f)
    return short_name(f).strip() + (" (inline)" if inline else "")


def fold(collapsed):
    """collapsed text -> {leaf-first tuple of names: bytes}, with jeprof's
    ReduceProfile (each name once per stack, first from the leaf kept)."""
    out = collections.Counter()
    for line in collapsed.splitlines():
        line = line.rstrip()
        if not line:
            continue
        stack, _, val = line.rpartition(" ")
        names = [norm(x) for x in stack.split(";")][::-1]
        seen, path = set(), []
        for n in names:
            if n and n not in seen:
                seen.add(n)
                path.append(n)
        out[tuple(path)] += int(float(val))
    return out


def table(folded):
    flat, cum = collections.Counter(), collections.Counter()
    for path, v in folded.items():
        if path:
            flat[path[0]] += v
        for n in path:
            cum[n] += v
    return flat, cum


def parse_jeprof_text(text):
    total, flat, cum = None, collections.Counter(), collections.Counter()
    for line in text.splitlines():
        m = re.match(r"^Total: (\d+) B", line)
        if m:
            total = int(m.group(1))
            continue
        m = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.*)$", line)
        if m:
            name = norm(m.group(3))
            flat[name] += int(m.group(1))
            cum[name] += int(m.group(2))
    return total, flat, cum


def close(a, b):
    return abs(a - b) <= max(1, 0.001 * max(abs(a), abs(b)))


def run(cmd, env=None, check=True, **kw):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="replace", **kw)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r


def build(src, work, rustcs):
    """Builds the shared library now; returns [(label, compile command,
    binary, objects-of-interest)] for the programs, compiled later in
    parallel."""
    out = []
    c_lib = os.path.join(work, "libfxshared.so")
    run(["gcc", "-g", "-O2", "-fPIC", "-shared", "-o", c_lib, os.path.join(src, "fx_c_lib.c")])
    fx_c = os.path.join(work, "fx_c")
    out.append(("c", ["gcc", "-g", "-O2", "-o", fx_c, os.path.join(src, "fx_c_main.c"),
                      "-L" + work, "-lfxshared", "-Wl,-rpath," + work], fx_c, [fx_c, c_lib]))
    # Non-PIE: the executable is mapped at its link-time addresses.
    fx_nopie = os.path.join(work, "fx_c_nopie")
    out.append(("c-nopie", ["gcc", "-g", "-O2", "-no-pie", "-fno-pie", "-o", fx_nopie,
                            os.path.join(src, "fx_c_main.c"), "-L" + work, "-lfxshared",
                            "-Wl,-rpath," + work], fx_nopie, [fx_nopie, c_lib]))
    if shutil.which("g++"):
        fx_cpp = os.path.join(work, "fx_cpp")
        out.append(("c++", ["g++", "-g", "-O2", "-o", fx_cpp, os.path.join(src, "fx_cpp.cc")],
                    fx_cpp, [fx_cpp]))
    else:
        print("skip c++ fixture: g++ not installed")
    # Every rustc here: their DWARF differs (rustc 1.63, Debian's, puts
    # methods inside their Self type's DIE; later ones use {impl#N}).
    for i, (version, rustc) in enumerate(rustcs):
        for label, extra in (("rust-legacy", []), ("rust-v0", ["-C", "symbol-mangling-version=v0"])):
            if i:
                label += "-" + version
            b = os.path.join(work, "fx_" + label.replace("-", "_").replace(".", "_"))
            out.append((label, [rustc, "-g", "-C", "opt-level=2", "-o", b] + extra +
                        [os.path.join(src, "fx_rust.rs")], b, [b]))
    if not rustcs:
        print("skip rust fixtures: rustc not installed")
    return out


def dump(binary, work):
    prefix = binary + ".prof"
    env = dict(os.environ, LD_PRELOAD=JEMALLOC,
               MALLOC_CONF="prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:" + prefix)
    run([binary], env=env)
    dumps = sorted(f for f in os.listdir(work)
                   if f.startswith(os.path.basename(prefix) + ".") and f.endswith(".heap"))
    if not dumps:
        raise RuntimeError("%s wrote no heap dump" % binary)
    return os.path.join(work, dumps[-1])


def compare_jeprof(label, symtool, binary, heap):
    jc = run(["jeprof", "--collapsed", binary, heap]).stdout
    jt = run(["jeprof", "--text", "--show_bytes", binary, heap]).stdout
    ours = run([symtool, "heap", "--jeprof-compat", "--binary", binary, heap]).stdout
    jtotal, jflat, jcum = parse_jeprof_text(jt)
    jfold, ofold = fold(jc), fold(ours)
    oflat, ocum = table(ofold)
    total = sum(ofold.values())
    if jtotal is None or not close(total, jtotal):
        fail("%s: total %d, jeprof says %s" % (label, total, jtotal))
        return
    threshold = 0.005 * jtotal
    names = {n for n in set(jflat) | set(jcum) | set(oflat) | set(ocum)
             if max(jflat[n], jcum[n], oflat[n], ocum[n]) >= threshold}
    checked = 0
    for n in sorted(names):
        checked += 1
        if not (close(jflat[n], oflat[n]) and close(jcum[n], ocum[n])):
            fail("%s: function %r: flat/cum %d/%d, jeprof %d/%d" %
                 (label, n, oflat[n], ocum[n], jflat[n], jcum[n]))
    # jeprof --text agrees with jeprof --collapsed by construction; check
    # the stacks themselves too.
    stacks = {s for s in set(jfold) | set(ofold) if max(jfold[s], ofold[s]) >= threshold}
    for s in sorted(stacks):
        if not close(jfold[s], ofold[s]):
            fail("%s: stack %s: %d bytes, jeprof %d" % (label, ";".join(reversed(s)),
                                                        ofold[s], jfold[s]))
    print("ok %s: %d functions and %d stacks >= 0.5%% of %d bytes agree with jeprof" %
          (label, checked, len(stacks), jtotal))


def parse_groups(text, tool):
    """addr2line -a / llvm-symbolizer --print-address output -> {addr: [(fn, file, line)]}"""
    res, cur, lines = {}, None, text.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i].strip()
        if not ln:
            i += 1
            continue
        if re.match(r"^0x[0-9a-f]+$", ln):
            cur = int(ln, 16)
            res[cur] = []
            i += 1
            continue
        fn = ln
        loc = lines[i + 1].strip() if i + 1 < len(lines) else "??:0"
        loc = re.sub(r"\s*\(discriminator \d+\)$", "", loc)
        parts = loc.split(":")
        if tool == "llvm" and len(parts) >= 3:
            f, l = ":".join(parts[:-2]), parts[-2]
        else:
            f, l = ":".join(parts[:-1]), parts[-1]
        try:
            l = int(l)
        except ValueError:
            l = 0
        res[cur].append((fn, f, l))
        i += 2
    return res


def frames_match(ours, theirs):
    if len(ours) != len(theirs):
        return False
    for (ofn, ofile, oline), (tfn, tfile, tline) in zip(ours, theirs):
        a, b = norm(ofn), norm(tfn)
        if not (a == b or a.startswith(b)):
            return False
        if os.path.basename(ofile) != os.path.basename(tfile) or oline != tline:
            return False
    return True


def spot_check(label, symtool, binary, heap, objects):
    out = run([symtool, "heap", "--addresses", "--binary", binary, heap]).stdout
    per_obj = collections.defaultdict(dict)
    for line in out.splitlines():
        obj, va, frames = line.split("\t")
        # The fixture's objects, plus system libraries that have separate
        # debug files on this host (libc6-dbg), which the tools find too.
        if os.path.realpath(obj) not in [os.path.realpath(o) for o in objects] and \
                "/libjemalloc" in obj:
            continue
        fr = []
        for f in frames.split("|"):
            fn, _, rest = f.rpartition("@")
            file, _, ln = rest.rpartition(":")
            fr.append((fn, file, int(ln)))
        if all(f[1] != "??" for f in fr):
            per_obj[obj][int(va, 16)] = fr
    tools = []
    if shutil.which("addr2line"):
        tools.append(("addr2line", lambda o, a: run(["addr2line", "-a", "-f", "-i", "-C", "-e", o] +
                                                    ["0x%x" % x for x in a]).stdout, "gnu"))
    else:
        print("skip addr2line spot-check: addr2line not installed")
    if shutil.which("llvm-symbolizer"):
        tools.append(("llvm-symbolizer",
                      lambda o, a: run(["llvm-symbolizer", "--print-address", "--obj=" + o] +
                                       ["0x%x" % x for x in a]).stdout, "llvm"))
    else:
        print("skip llvm-symbolizer spot-check: llvm-symbolizer not installed")
    # Every address must match every tool, except where the tools disagree
    # among themselves (binutils 2.40 reads GCC's DWARF 5 line programs with
    # the file register starting at 0, as libdwarf 20210528 does, where
    # llvm-symbolizer and eu-addr2line start at 1 as DWARF 5 says): then
    # heapfleet must match one of them, and the case is counted.
    answers = {}
    for tname, fn, style in tools:
        for obj, addrs in per_obj.items():
            theirs = parse_groups(fn(obj, sorted(addrs)), style)
            for a in addrs:
                answers.setdefault((obj, a), {})[tname] = theirs.get(a, [])
    counts = collections.Counter()
    for (obj, a), by_tool in sorted(answers.items()):
        fr = per_obj[obj][a]
        ok = {t: frames_match(fr, v) for t, v in by_tool.items()}
        counts["addresses"] += 1
        counts["inlined"] += len(fr) > 1
        if all(ok.values()):
            continue
        tools_agree = len(by_tool) > 1 and all(
            frames_match(v, w) for v in by_tool.values() for w in by_tool.values())
        if any(ok.values()) and not tools_agree:
            counts["tools disagree"] += 1
            print("note %s: 0x%x in %s: tools disagree; heapfleet matches %s" %
                  (label, a, obj, [t for t, g in ok.items() if g]))
            continue
        fail("%s: 0x%x in %s: ours %s, tools %s" % (label, a, obj, fr, by_tool))
    if counts["addresses"] == 0:
        fail("%s: no addresses to spot-check" % label)
    print("ok %s: %d addresses (%d with inlined frames) checked against %s; %d where the "
          "tools disagree" % (label, counts["addresses"], counts["inlined"],
                              " and ".join(t for t, _, _ in tools), counts["tools disagree"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--symtool", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    for tool in ("gcc", "jeprof"):
        if not shutil.which(tool):
            print("skip: %s not installed" % tool)
            return SKIP
    if not os.path.exists(JEMALLOC):
        print("skip: %s not installed" % JEMALLOC)
        return SKIP
    rustcs = rustc_list()
    work = tempfile.mkdtemp(prefix="hf-sym-compare-")
    try:
        def one(spec):
            label, cmd, binary, objects = spec
            try:
                run(cmd)
                heap = dump(binary, work)
                compare_jeprof(label, args.symtool, binary, heap)
                spot_check(label, args.symtool, binary, heap, objects)
            except Exception as e:  # a tool failing is a test failure, not a crash
                fail("%s: %s" % (label, e))

        # Two at a time: the machine has two cores.
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(one, build(args.src, work, rustcs)))
    finally:
        if args.keep:
            print("kept " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
