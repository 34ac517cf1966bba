#!/usr/bin/env python3
"""Physical frames are named with their class, as llvm-symbolizer names them.

GCC gives lambdas, members of templates over local types and functions in
anonymous namespaces no DW_AT_linkage_name; the old symbolizer printed the
bare DW_AT_name (`_M_run`, `_M_invoke`, `grow`, `fill`) where
llvm-symbolizer, jeprof and addr2line -C print
`std::thread::_State_impl<...>::_M_run()`. Builds
tests/sym/fixtures/fx_names.cc with g++ -g -O2, symbolizes every 4th byte of
every function with `symtool addr -a`, and compares the outermost frame of
each address with `llvm-symbolizer --inlining`: after template arguments,
parameter lists and clone suffixes are removed (the two demanglers spell
lambdas differently: {lambda()#1} and 'lambda'()), the qualified names must
be equal. Skips (77) without g++ or llvm-symbolizer.

  names.py --symtool PATH --src tests/sym/fixtures
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def strip_groups(s, open_c, close_c):
    out, depth = [], 0
    for ch in s:
        if ch == open_c:
            depth += 1
        elif ch == close_c and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def norm(name):
    """`ns::A<T>::f(int) [clone .constprop.0]` -> `ns::A::f`."""
    for suffix in (" [clone", " (."):
        k = name.find(suffix)
        if k > 0:
            name = name[:k]
    name = name.replace("(anonymous namespace)", "{anon}")
    name = strip_groups(strip_groups(name, "<", ">"), "(", ")")
    # A return type before the name ("void std::sort...").
    if " " in name.split("::")[0]:
        name = name.split(" ", 1)[1]
    return name.strip()


def groups(text):
    res, cur, lines, i = {}, None, text.splitlines(), 0
    while i < len(lines):
        ln = lines[i].strip()
        if not ln:
            i += 1
            continue
        if ln.startswith("0x"):
            cur = int(ln, 16)
            res[cur] = []
            i += 1
            continue
        res[cur].append(ln)
        i += 2
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--symtool", required=True)
    ap.add_argument("--src", required=True)
    a = ap.parse_args()
    for tool in ("g++", "llvm-symbolizer", "nm"):
        if not shutil.which(tool):
            print("skip: %s not installed" % tool)
            return 77
    work = tempfile.mkdtemp(prefix="hf-sym-names.")
    try:
        obj = os.path.join(work, "fx_names")
        subprocess.run(["g++", "-g", "-O2", "-pthread", "-o", obj,
                        os.path.join(a.src, "fx_names.cc")], check=True, timeout=600)
        nm = subprocess.run(["nm", "-S", "--defined-only", obj], capture_output=True, text=True,
                            check=True).stdout
        addrs = set()
        for line in nm.splitlines():
            f = line.split()
            if len(f) == 4 and f[2] in ("t", "T", "W", "w"):
                s, n = int(f[0], 16), int(f[1], 16)
                addrs.update(range(s, s + n, 4))
        inp = "".join("0x%x\n" % x for x in sorted(addrs))
        ours = groups(subprocess.run([a.symtool, "addr", "-a", obj, "-"], input=inp,
                                     capture_output=True, text=True, check=True).stdout)
        theirs = groups(subprocess.run(["llvm-symbolizer", "--print-address", "--inlining",
                                        "--demangle", "--obj=" + obj], input=inp,
                                       capture_output=True, text=True, check=True).stdout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bad, checked, seen = [], 0, set()
    for x in sorted(theirs):
        if not theirs[x] or not ours.get(x) or theirs[x][-1] == "??":
            continue
        checked += 1
        o, t = ours[x][-1], theirs[x][-1]
        seen.add(norm(t))
        if norm(o) != norm(t):
            bad.append((x, o, t))
    # The fixture must still produce the cases this test is about.
    want = ["std::thread::_State_impl::_M_run", "std::_Function_handler::_M_invoke",
            "{anon}::Hidden::grow", "outer::inner::Pool::fill", "{anon}::anon_free_function"]
    missing = [w for w in want if w not in seen]
    for x, o, t in bad[:10]:
        print("0x%x: ours %r, llvm-symbolizer %r" % (x, o, t))
    if missing:
        print("the fixture no longer has these functions: %s" % missing)
    if bad or missing or checked == 0:
        print("%d of %d physical frames differ" % (len(bad), checked))
        return 1
    print("ok: %d addresses, every physical frame named as llvm-symbolizer names it "
          "(%d distinct functions)" % (checked, len(seen)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
