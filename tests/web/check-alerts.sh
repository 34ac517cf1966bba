#!/bin/sh
# deploy/heapfleet-alerts.yml: every heapfleet_* series its expressions name
# is one /metrics exports (the family names in web/verdicts.c), and
# `promtool check rules` accepts it (syntax, PromQL, templates). Skips (77)
# after the series check when promtool is absent: Debian's `prometheus`
# package provides /usr/bin/promtool (deploy/run.sh installs it). Only the
# promtool binary runs; no Prometheus server is needed.
#
#   check-alerts.sh RULES.yml web/verdicts.c
set -eu
rules=$1
src=$2
names=$(grep -v '^[[:space:]]*#' "$rules" | grep -o 'heapfleet_[a-z_]*' | sort -u)
[ -n "$names" ] || { echo "FAIL: $rules names no heapfleet_* series"; exit 1; }
for name in $names; do
    grep -q "\"$name\"" "$src" || { echo "FAIL: $rules names $name, which /metrics does not export"; exit 1; }
done
echo "ok: the series $(echo $names | tr ' ' ',') are exported by /metrics"
if ! command -v promtool >/dev/null 2>&1; then
    echo "SKIP: promtool not found (apt-get install prometheus provides it); series names checked"
    exit 77
fi
out=$(promtool check rules "$rules" 2>&1) || { printf '%s\n' "$out"; echo "FAIL: promtool check rules refused $rules"; exit 1; }
printf '%s\n' "$out"
# promtool says how many rules it read: none would mean an empty file passed.
printf '%s\n' "$out" | grep -Eq 'SUCCESS: [1-9][0-9]* rules found' ||
    { echo "FAIL: promtool found no rules in $rules"; exit 1; }
