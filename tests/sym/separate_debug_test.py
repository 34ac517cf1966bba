#!/usr/bin/env python3
"""Separate debug files as distributions ship them (issue 11, section 3).

One small C program with an always-inline helper from a shared header is
built with gcc -g -O2 and symbolized, address by address over its
functions, with `symtool addr`. That output is the reference; each way a
distribution ships the same debug info must give exactly the same frames:

* compressed sections (gcc -gz: SHF_COMPRESSED .debug_*),
* a stripped binary with .gnu_debuglink to a debug file next to it and in
  .debug/, and a debuglink whose file is another build (refused by build-id),
* dwz with a common file (-m/-M: .gnu_debugaltlink, DW_FORM_GNU_strp_alt and
  DW_FORM_GNU_ref_alt), found where -M put it and, after the pair is moved,
  next to the binary; with the common file gone, no placeholder names and a
  note saying what is missing.

The inlined helper's name lives only in dwz's common file, so a reader that
ignores .gnu_debugaltlink fails the dwz case; binutils' addr2line does.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
failures = []

HEADER = r"""
#include <stdlib.h>
struct shared_block { void *p; int n; };
extern struct shared_block blocks[64];
static inline __attribute__((always_inline)) void *
shared_remember_block(void *p, int i)
{
    blocks[i].p = p;
    blocks[i].n = i;
    return p;
}
"""

MAIN = r"""
#include "common.h"
struct shared_block blocks[64];
__attribute__((noinline)) void FUNC(int n)
{
    for (int i = 0; i < n; i++)
        shared_remember_block(malloc(100 + i), i);
}
int main(void) { FUNC(10); return 0; }
"""


def check(cond, msg):
    if cond:
        print("ok: " + msg)
    else:
        failures.append(msg)
        print("FAIL: " + msg)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def func_addrs(binary, names):
    """Every instruction address of the named functions (from nm sizes)."""
    out = run(["nm", "-S", binary]).stdout
    addrs = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[3] in names:
            start, size = int(f[0], 16), int(f[1], 16)
            addrs += ["0x%x" % a for a in range(start, start + size)]
    return addrs


def symbolize(symtool, binary, addrs):
    p = subprocess.run([symtool, "addr", binary] + addrs, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr
    return p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--symtool", required=True)
    args = ap.parse_args()
    for tool in ("gcc", "objcopy", "strip", "nm", "readelf", "dwz"):
        if not shutil.which(tool):
            print("SKIP: %s not installed" % tool)
            return SKIP
    tmp = tempfile.mkdtemp(prefix="hf-sepdebug-")
    try:
        return run_cases(args.symtool, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build(tmp, name, func, extra=()):
    src = os.path.join(tmp, name + ".c")
    with open(src, "w") as f:
        f.write(MAIN.replace("FUNC", func))
    out = os.path.join(tmp, name)
    run(["gcc", "-g", "-O2", "-fno-pie", "-no-pie", "-I", tmp, *extra, "-o", out, src])
    return out


def run_cases(symtool, tmp):
    with open(os.path.join(tmp, "common.h"), "w") as f:
        f.write(HEADER)
    ref_bin = build(tmp, "prog", "make_blocks")
    addrs = func_addrs(ref_bin, ("make_blocks", "main"))
    check(len(addrs) > 20, "fixture has %d addresses to compare" % len(addrs))
    ref, _ = symbolize(symtool, ref_bin, addrs)
    check(ref is not None and "shared_remember_block" in ref and "make_blocks" in ref,
          "reference build names the inlined helper and its caller")

    # 1. gcc -gz: SHF_COMPRESSED debug sections.
    gz = os.path.join(tmp, "gz")
    os.mkdir(gz)
    shutil.copy(os.path.join(tmp, "prog.c"), gz)
    shutil.copy(os.path.join(tmp, "common.h"), gz)
    gz_bin = os.path.join(gz, "prog")
    run(["gcc", "-g", "-O2", "-fno-pie", "-no-pie", "-gz", "-I", gz, "-o", gz_bin,
         os.path.join(gz, "prog.c")])
    sections = run(["readelf", "-S", "-W", gz_bin]).stdout
    compressed = [l for l in sections.splitlines() if ".debug_info" in l and " C" in l]
    check(bool(compressed), "-gz build has a compressed .debug_info (SHF_COMPRESSED)")
    out, err = symbolize(symtool, gz_bin, func_addrs(gz_bin, ("make_blocks", "main")))
    check(out is not None and out.replace(gz + "/", tmp + "/") == ref,
          "compressed sections: same frames as the plain build")

    # 2. .gnu_debuglink, debug file next to the binary and in .debug/.
    for where in ("next", ".debug"):
        d = os.path.join(tmp, "link-" + where.strip("."))
        os.mkdir(d)
        b = os.path.join(d, "prog")
        shutil.copy(ref_bin, b)
        dbgdir = d if where == "next" else os.path.join(d, ".debug")
        os.makedirs(dbgdir, exist_ok=True)
        dbg = os.path.join(dbgdir, "prog.debug")
        run(["objcopy", "--only-keep-debug", b, dbg])
        run(["strip", "-g", b])
        run(["objcopy", "--add-gnu-debuglink=" + dbg, b])
        check(".debug_info" not in run(["readelf", "-S", "-W", b]).stdout,
              "debuglink (%s): binary is stripped of DWARF" % where)
        out, err = symbolize(symtool, b, addrs)
        check(out == ref, "debuglink, debug file %s: same frames as the unstripped build" % where)

    # A debuglink that names a file of another build: refused by build-id.
    d = os.path.join(tmp, "link-wrong")
    os.mkdir(d)
    b = os.path.join(d, "prog")
    shutil.copy(ref_bin, b)
    run(["objcopy", "--only-keep-debug", b, os.path.join(d, "prog.debug")])
    run(["strip", "-g", b])
    run(["objcopy", "--add-gnu-debuglink=" + os.path.join(d, "prog.debug"), b])
    other = build(tmp, "other", "make_blocks", ["-DOTHER_BUILD=1", "-fno-inline-small-functions"])
    run(["objcopy", "--only-keep-debug", other, os.path.join(d, "prog.debug")])
    out, err = symbolize(symtool, b, addrs)
    check(out is not None and "shared_remember_block" not in out and "common.h" not in out,
          "debuglink to another build: its DWARF is not used")
    check("build-id mismatch" in err, "debuglink to another build: the note says build-id mismatch")

    # 3. dwz with a common file.
    dz = os.path.join(tmp, "dwz")
    os.mkdir(dz)
    b1 = os.path.join(dz, "prog")
    shutil.copy(ref_bin, b1)
    b2 = build(tmp, "prog2", "other_blocks")
    shutil.copy(b2, os.path.join(dz, "prog2"))
    alt = os.path.join(dz, "common.debug")
    run(["dwz", "-m", alt, "-M", alt, b1, os.path.join(dz, "prog2")])
    info = run(["readelf", "--debug-dump=info", b1]).stdout
    check("alt indirect string" in info and "<alt 0x" in info,
          "dwz output uses DW_FORM_GNU_strp_alt and DW_FORM_GNU_ref_alt")
    check(".gnu_debugaltlink" in run(["readelf", "-S", "-W", b1]).stdout,
          "dwz output has .gnu_debugaltlink")
    out, err = symbolize(symtool, b1, addrs)
    check(out == ref, "dwz: same frames as before dwz (common file where -M put it)")

    # Moved together to another folder: the path -M wrote is gone.
    moved = os.path.join(tmp, "moved")
    os.mkdir(moved)
    shutil.move(b1, os.path.join(moved, "prog"))
    shutil.move(alt, os.path.join(moved, "common.debug"))
    out, err = symbolize(symtool, os.path.join(moved, "prog"), addrs)
    check(out == ref, "dwz: common file found next to the binary after both moved")

    # A common file of another dwz run (other build-id) is refused.
    os.rename(os.path.join(moved, "common.debug"), os.path.join(moved, "real.debug"))
    d3 = os.path.join(tmp, "dwz-other")
    os.mkdir(d3)
    o1 = os.path.join(d3, "prog")
    # -O1 changes the DIEs dwz shares, so its common file differs too.
    shutil.copy(build(tmp, "prog3", "make_blocks", ["-O1"]), o1)
    shutil.copy(build(tmp, "prog4", "other_blocks", ["-O1"]), os.path.join(d3, "prog2"))
    run(["dwz", "-m", os.path.join(d3, "common.debug"), "-M", os.path.join(d3, "x.debug"),
         o1, os.path.join(d3, "prog2")])
    shutil.copy(os.path.join(d3, "common.debug"), os.path.join(moved, "common.debug"))
    out, err = symbolize(symtool, os.path.join(moved, "prog"), addrs)
    check(out is not None and "<DW_FORM" not in out, "wrong common file: no placeholder names")
    check("build-id mismatch" in err and "dwz common file" in err,
          "wrong common file: refused by build-id, and the note says so")

    # Gone: lines still resolve, names dwz moved are missing, and said so.
    os.unlink(os.path.join(moved, "common.debug"))
    out, err = symbolize(symtool, os.path.join(moved, "prog"), addrs)
    check(out is not None and "<DW_FORM" not in out and "make_blocks" in out,
          "no common file: no placeholder names, the caller still named")
    check("dwz common file" in err and "not found" in err,
          "no common file: the note names what is missing")

    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
