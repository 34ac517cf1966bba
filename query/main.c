/* `query`: answers from heap profiles, on files or on the store. This file
 * only dispatches to the command table; each command lives in cmd-*.c. */
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "query/cli.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    { "top", query_cmd_top, "function table of one snapshot or profile file" },
    { "export", query_cmd_export, "one profile as collapsed stacks, JSON, pprof, dot or SVG" },
    { "diff", query_cmd_diff, "B minus A: what grew or shrank, with sampling noise" },
    { "fleet", query_cmd_fleet, "nodes far above the fleet median, per function and stack" },
    { "trend", query_cmd_trend, "series of heap total, node figures and functions" },
    { "leaks", query_cmd_leaks, "stacks and functions that grow steadily across snapshots" },
    { "discrepancy", query_cmd_discrepancy, "the node's memory trackers next to its heap profile" },
    { "import", query_cmd_import, "load profile files into the database as a node's snapshots" },
    { "reindex", query_cmd_reindex, "re-derive stored snapshots from their raw dumps" },
    { "nodes", query_cmd_nodes, "list stored nodes with their last status" },
    { "snapshots", query_cmd_snapshots, "list a node's stored snapshots" },
    { "symbols", query_cmd_symbols, "add binaries or debug files to the store, list them" },
    { "retain", query_cmd_retain, "delete old snapshots, thin to one a day, reclaim space" },
    { "collectors", query_cmd_collectors, "collectors sharing the fleet (PostgreSQL): health" },
    { "migrate", query_cmd_migrate, "copy an SQLite store into PostgreSQL, resumable" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: query COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < HP_ARRAY_SIZE(commands); i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'query COMMAND --help' describes a command's options.\n");
}

/* `query top` and `query export` are short processes that build one
 * profile's tables in a heap of tens of MB and exit: first-touch page
 * faults were a sixth of a warm `query top --binary` (one per 4 KiB:
 * 7,000 for sym-bench's profile; perf: exc_page_fault, clear_page,
 * realloc copying into fresh pages). So their heap comes from one brk
 * region of 64 MB, asked to be backed by transparent huge pages where the
 * system allows it (THP "madvise" or "always"; with "never" this is only
 * the larger brk steps), and nothing is handed back before exit: 7,000
 * faults become about 1,000, the run about a fifth faster (glibc's
 * glibc.malloc.hugetlb=1 tunable does the same; a program cannot set it
 * for itself). `query leaks` too: it reads 100 nodes' series one after
 * another, and each node's scratch was mapped and unmapped afresh (0.64 s
 * of system time in the leaks bench, 0.2-0.3 s so). Not for the store
 * commands, which run long. */
static void heap_prepare(void)
{
    const size_t pad = (size_t)64 << 20, huge = (size_t)2 << 20;
    if (!mallopt(M_MMAP_THRESHOLD, 256 << 20) || !mallopt(M_TRIM_THRESHOLD, 512 << 20) ||
        !mallopt(M_TOP_PAD, (int)pad))
        return;
    /* More than the top chunk holds: the brk heap grows by it and pad.
     * volatile, or the compiler drops the unused malloc/free pair. */
    void *volatile p = malloc(pad / 2);
    free(p);
    char *b = sbrk(0);
    size_t arena = mallinfo2().arena; /* bytes of the brk heap, which ends at b */
    if (b == (char *)-1 || arena == 0 || arena > (uintptr_t)b)
        return;
    uintptr_t lo = ((uintptr_t)b - arena + huge - 1) & ~(uintptr_t)(huge - 1);
    uintptr_t hi = (uintptr_t)b & ~(uintptr_t)(huge - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < HP_ARRAY_SIZE(commands); i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            if (commands[i].run == query_cmd_top || commands[i].run == query_cmd_export ||
                commands[i].run == query_cmd_leaks)
                heap_prepare();
            return commands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "query: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
