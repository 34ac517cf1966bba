#!/bin/sh
# The on-disk symbol cache through `query` (issue 11): a second
# `query top FILE --binary B` reads its answers from
# $XDG_CACHE_HOME/heapfleet/sym and prints exactly what the first run and a
# --no-cache run print; a truncated or garbage cache file is ignored and
# replaced; concurrent runs leave a whole file; without XDG_CACHE_HOME the
# cache is ~/.cache/heapfleet/sym.
# usage: symcache.sh QUERY JEFIXTURE
set -eu
query=$1 jefixture=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
MALLOC_CONF=prof:true,lg_prof_sample:0 "$jefixture" --threads 2 "$dir/a.heap" > /dev/null
export XDG_CACHE_HOME="$dir/xdg"
cache=$XDG_CACHE_HOME/heapfleet/sym
run() { # run NAME [query options]: text table and collapsed stacks with file:line
    name=$1
    shift
    "$query" top --binary "$jefixture" "$dir/a.heap" --lines --top 0 "$@" > "$dir/$name.txt"
    "$query" export --format collapsed --binary "$jefixture" "$dir/a.heap" --lines "$@" \
        >> "$dir/$name.txt"
}
run nocache --no-cache
[ ! -d "$cache" ] || fail "--no-cache wrote $cache"
run cold
bid=$(readelf -n "$jefixture" | awk '/Build ID/ { print $3 }')
file=$cache/$bid.hfsym
[ -s "$file" ] || fail "no cache file $file after the first run: $(ls -la "$cache" 2>&1)"
sum=$(md5sum < "$file")
run warm
cmp "$dir/cold.txt" "$dir/warm.txt" || fail "warm output differs from cold"
cmp "$dir/cold.txt" "$dir/nocache.txt" || fail "cold output differs from --no-cache"
grep -q 'tracked_alloc' "$dir/warm.txt" || fail "warm output has no names: $(head "$dir/warm.txt")"
[ "$(md5sum < "$file")" = "$sum" ] || fail "an all-hits run rewrote the cache file"

size=$(stat -c %s "$file")
for damage in truncate garbage empty; do
    case $damage in
    truncate) head -c $((size / 2)) "$file" > "$dir/t" && mv "$dir/t" "$file" ;;
    garbage) head -c "$size" /dev/urandom > "$file" ;;
    empty) : > "$file" ;;
    esac
    run "$damage"
    cmp "$dir/cold.txt" "$dir/$damage.txt" || fail "output with a $damage cache file differs"
    [ "$(stat -c %s "$file")" = "$size" ] || fail "the $damage cache file was not replaced"
    [ "$(md5sum < "$file")" = "$sum" ] || fail "the $damage cache file was replaced by another"
done

# Concurrent writers: four runs on an empty cache at once.
rm -rf "$cache"
for i in 1 2 3 4; do run "par$i" & done
wait
for i in 1 2 3 4; do
    cmp "$dir/cold.txt" "$dir/par$i.txt" || fail "concurrent run $i printed something else"
done
[ "$(md5sum < "$file")" = "$sum" ] || fail "concurrent writers left a different file"
if ls "$cache" | grep -q '\.tmp\.'; then fail "temporary files left: $(ls "$cache")"; fi

# No XDG_CACHE_HOME: ~/.cache/heapfleet/sym.
unset XDG_CACHE_HOME
HOME=$dir/home run home
[ -s "$dir/home/.cache/heapfleet/sym/$bid.hfsym" ] || fail "no cache under \$HOME/.cache"
cmp "$dir/cold.txt" "$dir/home.txt" || fail "output under HOME differs"
echo "ok: warm = cold = --no-cache ($(wc -l < "$dir/cold.txt") lines), damaged files replaced, 4 concurrent writers"
