#!/bin/sh
# Parser totals must equal jeprof's "Total:" on every fixture profile, for all
# four sample types. Profiles are made here, by the fixture programs, with
# several sampling periods (exact and sampled, alloc columns on).
# usage: jeprof-compare.sh QUERY JEFIXTURE [TCFIXTURE]
set -eu
query=$1 jefixture=$2 tcfixture=${3:-}
if ! command -v jeprof >/dev/null 2>&1; then
    echo "SKIP: jeprof is not installed (Debian package libjemalloc-dev)"
    exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0 checked=0
# jeprof symbolizes every address with nm and addr2line before it prints
# "Total:", which does not depend on names: that was nearly all of this
# test's time (about 3 s of CPU a call, 28 calls). jeprof reads a copy
# without the MAPPED_LIBRARIES section, with /bin/true as the program, so it
# has nothing to symbolize; once per fixture (full_check) the same total
# comes from the whole file and the real binary, to show the copy changes
# nothing. heapfleet always reads the whole file.
jeprof_total() { # sample file binary
    jeprof --text --show_bytes --$1 "$3" "$2" 2>/dev/null | sed -n 's/^Total: \([0-9-]*\) .*/\1/p'
}
full_check() { # file binary
    want=$(jeprof_total inuse_space "$1" "$2")
    got=$(jeprof_total inuse_space "$1.nomaps" /bin/true)
    checked=$((checked + 1))
    if [ -z "$want" ] || [ "$want" != "$got" ]; then
        echo "MISMATCH $(basename "$1"): jeprof with the binary=$want, without the maps=$got"
        fail=1
    else
        echo "ok $(basename "$1"): jeprof without the maps section agrees ($got)"
    fi
}
compare() { # file binary
    sed '/^MAPPED_LIBRARIES:/,$d' "$1" > "$1.nomaps"
    for s in inuse_space inuse_objects alloc_space alloc_objects; do
        want=$(jeprof_total $s "$1.nomaps" /bin/true)
        got=$("$query" export "$1" --format json --sample $s --no-symbolize | sed -n 's/^ "total": \([0-9-]*\),$/\1/p')
        checked=$((checked + 1))
        if [ -z "$want" ] || [ "$want" != "$got" ]; then
            echo "MISMATCH $(basename "$1") $s: jeprof=$want heapfleet=$got"
            fail=1
        else
            echo "ok $(basename "$1") $s: $got"
        fi
    done
}
for lg in 0 8 12 16 19; do
    MALLOC_CONF="prof:true,prof_accum:true,lg_prof_sample:$lg" \
        "$jefixture" --threads 6 --rounds 3 --scale 4 "$dir/je-lg$lg.heap"
    compare "$dir/je-lg$lg.heap" "$jefixture"
done
full_check "$dir/je-lg19.heap" "$jefixture"
if [ -n "$tcfixture" ] && [ -x "$tcfixture" ]; then
    HEAPPROFILE="$dir/unused" "$tcfixture" heapprofile "$dir/tc-heapprofile.heap" 2>/dev/null
    compare "$dir/tc-heapprofile.heap" "$tcfixture"
    TCMALLOC_SAMPLE_PARAMETER=4096 "$tcfixture" sample "$dir/tc-sample.heap"
    compare "$dir/tc-sample.heap" "$tcfixture"
    full_check "$dir/tc-sample.heap" "$tcfixture"
fi
echo "$checked comparisons"
exit $fail
