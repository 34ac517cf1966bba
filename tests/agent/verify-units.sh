#!/bin/sh
# Check the systemd units in deploy/ with `systemd-analyze verify`.
#   verify-units.sh UNIT_DIR AGENT_EXE [COLLECTOR_EXE]
# systemd-analyze insists that ExecStart= names an existing executable, so the
# installed paths are replaced by the built ones in a temporary copy; when the
# collector is not built in this tree the agent binary stands in for it (only
# the unit's syntax and settings are under test, not the program).
# Exit 77 (skip) when systemd-analyze is missing.
set -eu
unitdir=$1
agent=$(realpath "$2")
collector=$(realpath "${3:-$2}" 2>/dev/null || echo "$agent")
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "SKIP: systemd-analyze not installed (apt package systemd)"
    exit 77
fi
[ -x "$collector" ] || collector=$agent
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for u in heapfleet-agent.service heapfleet-collector.service; do
    sed -e "s|^ExecStart=[^ ]*/agent |ExecStart=$agent |" \
        -e "s|^ExecStart=[^ ]*/collector |ExecStart=$collector |" \
        "$unitdir/$u" > "$tmp/$u"
done
out=$(cd "$tmp" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no \
        ./heapfleet-agent.service ./heapfleet-collector.service 2>&1) || {
    echo "$out"
    echo "FAIL: systemd-analyze verify exited non-zero"
    exit 1
}
# verify also prints warnings without failing; any line about our units is a defect.
if echo "$out" | grep -E 'heapfleet-(agent|collector)\.service' ; then
    echo "FAIL: systemd-analyze verify complained about the units"
    exit 1
fi
echo "$out"
# For the record (not a pass/fail criterion): systemd's exposure score.
for u in heapfleet-agent.service heapfleet-collector.service; do
    (cd "$tmp" && systemd-analyze security --offline=true --no-pager "./$u" 2>/dev/null |
        grep 'Overall exposure level') || true
done
echo "ok: systemd-analyze verify accepts both units ($(systemd-analyze --version | head -1))"
