#!/usr/bin/env python3
"""file:line of every Rust function against llvm-symbolizer (issue 11).

tests/sym/fixtures/fx_rust.rs is built with every rustc on the machine
(-g -C opt-level=2); the start and the middle of every function of the binary
(std, gimli, addr2line, the fixture: ~1100 addresses) go through `symtool
addr` and `llvm-symbolizer --inlining`, and every frame's file:line must
agree. One documented difference is allowed: where no line-table row covers
an address (LLVM leaves some std functions' code without rows), both print
line 0, llvm-symbolizer names the CU ("addr2line.<hash>-cgu.0") and heapfleet
prints "??" (no row, no file); those are counted and printed.

This caught libdwarf 20210528 reporting every row made after
DW_LNS_set_epilogue_begin as an end of sequence (??:0 for the innermost frame
of ~1.4% of the functions of a rustc 1.95 binary; dwarf.c, cu_load_lines).

  rust_lines.py --symtool PATH --src tests/sym/fixtures [--work DIR]
Skips (77) without rustc or llvm-symbolizer.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import parse_groups  # noqa: E402
from repeat import function_spans, rustc_list  # noqa: E402


def groups(text, llvm):
    """{addr: [(file basename, line)]} of compare.py's parse_groups."""
    return {a: [(os.path.basename(f), l) for _, f, l in fr]
            for a, fr in parse_groups(text, "llvm" if llvm else "ours").items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--symtool", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--work")
    a = ap.parse_args()
    llvm = shutil.which("llvm-symbolizer") or shutil.which("llvm-symbolizer-14")
    rustcs = rustc_list()
    if not llvm or not rustcs:
        print("skip: needs rustc and llvm-symbolizer")
        return 77
    work = a.work or tempfile.mkdtemp(prefix="hf-rust-lines-")
    bad = 0
    for version, rustc in rustcs:
        b = os.path.join(work, "fx_rust_" + version.replace(".", "_"))
        subprocess.run([rustc, "-g", "-C", "opt-level=2", "-o", b,
                        os.path.join(a.src, "fx_rust.rs")], check=True, timeout=600)
        addrs = []
        for start, size in function_spans(b):
            addrs.append(start)
            if size > 2:
                addrs.append(start + size // 2)
        inp = "".join("0x%x\n" % x for x in addrs)
        ours = groups(subprocess.run([a.symtool, "addr", "-a", b, "-"], input=inp,
                                     capture_output=True, text=True, check=True).stdout, False)
        theirs = groups(subprocess.run([llvm, "--obj=" + b, "--inlining", "--demangle",
                                        "--print-address"], input=inp, capture_output=True,
                                       text=True, check=True).stdout, True)
        n = no_rows = diff = 0
        for x in sorted(theirs):
            o, t = ours.get(x, []), theirs[x]
            n += 1
            if o == t:
                continue
            if (len(o) == len(t) and o and o[0] == ("??", 0) and t[0][1] == 0 and
                    o[1:] == t[1:]):
                no_rows += 1
                continue
            diff += 1
            if diff <= 10:
                print("FAIL rust %s: 0x%x: ours %s, llvm-symbolizer %s" % (version, x, o, t))
        print("%s rust %s: %d addresses, %d differ, %d without line rows (llvm-symbolizer "
              "names the CU, heapfleet ??:0)" % ("ok" if diff == 0 else "FAIL", version, n,
                                                  diff, no_rows))
        bad += diff
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
