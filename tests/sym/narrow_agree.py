#!/usr/bin/env python3
"""The narrow DWARF readers (collector/sym/dwraw.c) against libdwarf alone.

dwraw.c reads line programs and functions' inline trees itself, where
libdwarf's API was the measured bottleneck (issue 11); libdwarf stays the
DWARF library for everything else. This builds the fixtures in every DWARF
flavour on the machine, C and C++ with gcc (DWARF 5 and 4, -O2 and -O0),
C with clang (DWARF 5: DW_FORM_addrx, file 0 used explicitly), Rust with
every rustc (LLVM's DWARF 4, legacy and v0 mangling, methods inside types
for old rustc) and the generated many-CU C++ of repeat.py, and runs
`symtool dwarf-agree` on every byte of every function (a sample of 40,000
addresses at most per binary): each address's frames (name, file, line,
entry, qualified name) must be the same through both readers, and the narrow
ones must have read line tables and inline trees (else it proves nothing).

  narrow_agree.py --symtool PATH --src tests/sym/fixtures [--work DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repeat import build_cpp, function_spans, rustc_list  # noqa: E402

MAX_ADDRS = 40000


def function_addrs(binary):
    spans = [(a, s) for a, s in function_spans(binary) if a and s]
    total = sum(s for _, s in spans) or 1
    step = max(1, -(-total // MAX_ADDRS))
    return [a + k for a, s in sorted(set(spans)) for k in range(0, s, step)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--symtool", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--work")
    a = ap.parse_args()
    if a.work:
        os.makedirs(a.work, exist_ok=True)
        return agree(a, a.work)
    # Without --work the builds go when done (each run left 42 MB behind).
    with tempfile.TemporaryDirectory(prefix="hf-narrow-") as work:
        return agree(a, work)


def agree(a, work):
    src = a.src
    builds = []
    c_main = os.path.join(src, "fx_c_main.c")
    c_lib = os.path.join(src, "fx_c_lib.c")
    for label, flags in (("gcc-O2", ["-O2"]), ("gcc-O2-dwarf4", ["-O2", "-gdwarf-4"]),
                         ("gcc-O0", ["-O0"])):
        builds.append(("c-" + label, ["gcc", "-g"] + flags + ["-o", None, c_main, c_lib]))
    if shutil.which("clang"):
        builds.append(("c-clang-O2", ["clang", "-g", "-O2", "-o", None, c_main, c_lib]))
    else:
        print("skip clang fixture: clang not installed")
    if shutil.which("g++"):
        for name in ("fx_cpp.cc", "fx_names.cc"):
            for label, flags in (("O2", ["-O2"]), ("O2-dwarf4", ["-O2", "-gdwarf-4"])):
                builds.append(("%s-%s" % (name[:-3], label),
                               ["g++", "-g", "-pthread"] + flags +
                               ["-o", None, os.path.join(src, name)]))
    else:
        print("skip c++ fixtures: g++ not installed")
    for version, rustc in rustc_list():
        for label, extra in (("legacy", []), ("v0", ["-C", "symbol-mangling-version=v0"])):
            builds.append(("rust-%s-%s" % (version, label),
                           [rustc, "-g", "-C", "opt-level=2", "-o", None] + extra +
                           [os.path.join(src, "fx_rust.rs")]))
    binaries = []
    for label, cmd in builds:
        out = os.path.join(work, label.replace(".", "_"))
        cmd = [out if x is None else x for x in cmd]
        subprocess.run(cmd, check=True, timeout=600)
        binaries.append((label, out))
    if shutil.which("g++"):
        binaries.append(("many-cu-c++", build_cpp(work, 16)))
    # Debug sections compressed in place (SHF_COMPRESSED, zlib), as Debian's
    # -dbgsym files have them: the narrow readers must read those too.
    for label, b in list(binaries):
        if label in ("c-gcc-O2", "fx_cpp-O2", "many-cu-c++"):
            z = b + "-zlib"
            subprocess.run(["objcopy", "--compress-debug-sections=zlib", b, z], check=True,
                           timeout=120)
            binaries.append((label + "-zlib", z))
    if not binaries:
        print("skip: no compiler")
        return 77
    bad = 0
    for label, b in binaries:
        addrs = function_addrs(b)
        r = subprocess.run([a.symtool, "dwarf-agree", b, "-"],
                           input="".join("0x%x\n" % x for x in addrs),
                           capture_output=True, text=True, timeout=600)
        print("%-28s %s" % (label, r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""))
        if r.returncode != 0:
            bad += 1
            print(r.stdout[-4000:], r.stderr[-2000:])
    if bad:
        print("FAIL: %d of %d binaries differ between the narrow readers and libdwarf"
              % (bad, len(binaries)))
        return 1
    print("ok: %d binaries, the narrow readers and libdwarf agree" % len(binaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
