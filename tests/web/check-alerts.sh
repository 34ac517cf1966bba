#!/bin/sh
# deploy/heapfleet-alerts.yml: `promtool check rules` accepts it, and every
# heapfleet_* series its expressions name is one /metrics exports (the family
# names in web/verdicts.c). Skips (77) when promtool is absent: Debian's
# `prometheus` package provides it.
#
#   check-alerts.sh RULES.yml web/verdicts.c
set -eu
rules=$1
src=$2
for name in $(grep -o 'heapfleet_[a-z_]*' "$rules" | sort -u); do
    grep -q "\"$name\"" "$src" || { echo "FAIL: $rules names $name, which /metrics does not export"; exit 1; }
done
if ! command -v promtool >/dev/null 2>&1; then
    echo "SKIP: promtool not found (apt-get install prometheus provides it); series names checked"
    exit 77
fi
promtool check rules "$rules"
