#!/bin/sh
# A timed libFuzzer run of one target (CI, -Dfuzzing=true builds):
#   run-timed.sh TARGET SEED_CORPUS WORKDIR
# Runs TARGET for $FUZZ_SECONDS (default 20) starting from the seed corpus.
# New inputs and any crash, leak or timeout reproducer go to WORKDIR, never
# into the repository; a crash fails the run, and its reproducer is named.
set -u
target=$1 seeds=$2 work=$3
secs=${FUZZ_SECONDS:-20}
rm -rf "$work"
# libdwarf is built without frame pointers: ASan's fast unwinder stops at
# its first frame, and lsan.supp names libdwarf functions further up.
# fuzz-elf unwinds its allocations the slow way (2.6 times fewer runs a
# second) so that only those leaks are let through.
case $(basename "$target") in
fuzz-elf) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" ;;
esac
mkdir -p "$work/corpus" "$work/artifacts"
# libFuzzer's own error exit code is 77, which meson reads as "skipped":
# a crash or leak must fail the test, so it is 1 here.
LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/lsan.supp" \
"$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -error_exitcode=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" >"$work/log" 2>&1
rc=$?
tail -n 15 "$work/log"
if [ $rc -ne 0 ]; then
    echo "$(basename "$target"): libFuzzer failed (exit $rc) after up to ${secs}s; reproducers:"
    ls -l "$work/artifacts/"
    echo "replay one with: $target $work/artifacts/<file>"
fi
exit $rc
