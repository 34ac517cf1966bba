#!/usr/bin/env python3
"""Unique lookup addresses of one binary in a jemalloc heap dump, as jeprof
asks addr2line for them: ELF virtual addresses through the maps line and the
binary's PT_LOAD headers, callers minus one, the leaf as recorded.
usage: sym-addrs.py HEAP BINARY > addrs.txt"""
import os
import re
import subprocess
import sys


def main():
    heap, binary = sys.argv[1], os.path.realpath(sys.argv[2])
    loads = []
    for line in subprocess.run(["readelf", "-lW", binary], stdout=subprocess.PIPE,
                               text=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            loads.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))  # off, vaddr, filesz
    maps, stacks, in_maps = [], [], False
    with open(heap, errors="replace") as fh:
        for line in fh:
            if line.startswith("MAPPED_LIBRARIES"):
                in_maps = True
            elif in_maps:
                m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+) ([0-9a-f]+) \S+ \d+\s+(.*)$", line)
                if m and "x" in m.group(3) and os.path.realpath(m.group(5).strip()) == binary:
                    maps.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(4), 16)))
            elif line.startswith("@"):
                stacks.append([int(x, 16) for x in line.split()[1:]])
    out = set()
    for st in stacks:
        for i, a in enumerate(st):
            a = a if i == 0 else a - 1
            for start, limit, off in maps:
                if start <= a < limit:
                    fo = a - start + off
                    for poff, pv, psz in loads:
                        if poff <= fo < poff + psz:
                            out.add(fo - poff + pv)
                            break
    for v in sorted(out):
        print("0x%x" % v)


if __name__ == "__main__":
    main()
