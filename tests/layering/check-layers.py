#!/usr/bin/env python3
"""Check the module graph that docs/DESIGN.md documents against the code.

The table under "<!-- layers -->" in docs/DESIGN.md names each module, the
files that belong to it (glob patterns; the most specific pattern wins),
the modules it builds on and its public headers. This script reads every
.c and .h file of the tree (tests/ and build folders excepted) and fails
when a file
  - belongs to no module of the table,
  - includes a header of a module that its module does not build on
    (directly or through others): a module above it or beside it, or
  - includes a header of a module below it that is not one of that
    module's public headers,
and when the root meson.build enters a module's folder before the folders
of the modules it builds on. Each failure names the file, the line and what
the table allows.

  check-layers.py SRCROOT         check the tree
  check-layers.py --self-test     check that violations are caught
"""
import fnmatch
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SKIP_DIRS = {"tests", "node_modules", ".git", "subprojects"}


def read_table(root):
    path = os.path.join(root, "docs", "DESIGN.md")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        start = lines.index("<!-- layers -->")
    except ValueError:
        sys.exit(f"{path}: no '<!-- layers -->' table")
    mods = {}
    order = []
    for n, line in enumerate(lines[start + 1:], start + 2):
        if not line.startswith("|"):
            if mods:
                break
            continue
        cells = [c.strip().strip("`").strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("module", "") or set(cells[0]) <= set("-: "):
            continue
        name, paths, uses, public, folder = cells

        def words(s):
            return [w.strip("`") for w in s.replace(",", " ").split() if w.strip("`") not in ("-", "")]

        if name in mods:
            sys.exit(f"{path}:{n}: module {name} listed twice")
        mods[name] = {"paths": words(paths), "uses": words(uses), "public": words(public),
                      "folder": words(folder), "line": n}
        order.append(name)
    for name, m in mods.items():
        for u in m["uses"]:
            if u not in mods:
                sys.exit(f"{path}:{m['line']}: module {name} uses unknown module {u}")
    return mods, order, path


def closure(mods, name, seen=None):
    seen = set() if seen is None else seen
    for u in mods[name]["uses"]:
        if u not in seen:
            seen.add(u)
            closure(mods, u, seen)
    return seen


def module_of(mods, rel):
    best, best_len = None, -1
    for name, m in mods.items():
        for pat in m["paths"]:
            if fnmatch.fnmatchcase(rel, pat) or (pat.endswith("/") and rel.startswith(pat)):
                spec = len(pat.rstrip("*"))
                if spec > best_len:
                    best, best_len = name, spec
    return best


def check(root):
    mods, order, table = read_table(root)
    errors = []
    below = {name: closure(mods, name) for name in mods}
    for name in mods:
        if name in below[name]:
            errors.append(f"{table}:{mods[name]['line']}: module {name} depends on itself (a cycle)")
    nfiles = 0
    for d, subdirs, files in os.walk(root):
        rel_d = os.path.relpath(d, root)
        subdirs[:] = sorted(s for s in subdirs if s not in SKIP_DIRS and not s.startswith("build")
                            and not (rel_d == "." and s == "docs"))
        for fn in sorted(files):
            if not fn.endswith((".c", ".h")):
                continue
            rel = os.path.normpath(os.path.join(rel_d, fn))
            nfiles += 1
            mine = module_of(mods, rel)
            if mine is None:
                errors.append(f"{rel}: belongs to no module of the table in {table}")
                continue
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                for ln, line in enumerate(f, 1):
                    mt = INCLUDE.match(line)
                    if not mt:
                        continue
                    inc = os.path.normpath(mt.group(1))
                    if "/" not in inc:  # a header next to the file
                        inc = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
                    theirs = module_of(mods, inc)
                    if theirs is None or theirs == mine:
                        continue
                    if theirs not in below[mine]:
                        allowed = " ".join(sorted(below[mine])) or "nothing"
                        errors.append(f"{rel}:{ln}: {mine} includes {mt.group(1)} of module {theirs}, "
                                      f"which it does not build on ({mine} builds on: {allowed})")
                    elif inc not in mods[theirs]["public"]:
                        pub = " ".join(mods[theirs]["public"]) or "none"
                        errors.append(f"{rel}:{ln}: {mine} includes {mt.group(1)}, private to module "
                                      f"{theirs} (its public headers: {pub})")
    # The root meson.build enters folders in dependency order.
    meson = os.path.join(root, "meson.build")
    entered = []
    with open(meson, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            mt = re.match(r"\s*subdir\('([^']+)'\)", line)
            if mt:
                entered.append((mt.group(1), ln))
    pos = {}
    for name in mods:
        for folder in mods[name]["folder"]:
            for i, (sd, ln) in enumerate(entered):
                if sd == folder.rstrip("/"):
                    pos[name] = (i, ln, sd)
    for name in mods:
        if name not in pos:
            continue
        for u in below[name]:
            if u in pos and pos[u][0] > pos[name][0]:
                errors.append(f"{meson}:{pos[name][1]}: subdir('{pos[name][2]}') ({name}) comes before "
                              f"subdir('{pos[u][2]}') ({u}, which it builds on)")
    return errors, nfiles, len(mods)


def self_test():
    """A small tree with one violation of each kind: each must be reported."""
    with tempfile.TemporaryDirectory() as t:
        def put(rel, text):
            os.makedirs(os.path.dirname(os.path.join(t, rel)), exist_ok=True)
            with open(os.path.join(t, rel), "w") as f:
                f.write(text)
        put("docs/DESIGN.md", "\n".join([
            "<!-- layers -->",
            "| module | files | builds on | public headers | folder |",
            "| --- | --- | --- | --- | --- |",
            "| base | `base/` | - | `base/base.h` | `base` |",
            "| mid | `mid/` | base | `mid/mid.h` | `mid` |",
            "| top | `top/` | mid | - | `top` |",
            ""]))
        put("meson.build", "subdir('base')\nsubdir('top')\nsubdir('mid')\n")
        put("base/base.h", '#include "mid/mid.h"\n')          # upward
        put("base/base-internal.h", "\n")
        put("mid/mid.h", '#include "base/base.h"\n')          # fine
        put("mid/m.c", '#include "base/base-internal.h"\n')   # private header
        put("top/t.c", '#include "mid/mid.h"\n#include "base/base.h"\n')  # fine (transitive)
        put("stray/s.c", "\n")                                # no module
        errors, _, _ = check(t)
        want = ["base/base.h:1: base includes mid/mid.h of module mid",
                "mid/m.c:1: mid includes base/base-internal.h, private to module base",
                "stray/s.c: belongs to no module",
                "subdir('top') (top) comes before subdir('mid')"]
        ok = True
        for w in want:
            if not any(w in e for e in errors):
                print(f"self-test: not reported: {w}")
                ok = False
        if len(errors) != len(want):
            print("self-test: expected exactly %d reports, got %d:" % (len(want), len(errors)))
            ok = False
        for e in errors:
            print("  " + e)
        return ok


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    errors, nfiles, nmods = check(sys.argv[1])
    for e in errors:
        print(e)
    if errors:
        print(f"layering: {len(errors)} violation(s) in {nfiles} files (see docs/DESIGN.md)")
        sys.exit(1)
    print(f"layering: {nfiles} files of {nmods} modules include only downward, public headers")


if __name__ == "__main__":
    main()
