/* `query`: answers from heap profiles, on files or on the store. This file
 * only dispatches to the command table; each command lives in cmd-*.c. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
                commands[i].run == query_cmd_leaks || commands[i].run == query_cmd_diff ||
                commands[i].run == query_cmd_fleet)
                hp_heap_prepare(); /* hp.h says why */
            return commands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "query: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
