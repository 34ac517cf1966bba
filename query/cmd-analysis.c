#include "query/cli.h"
int query_cmd_fleet(int argc, char **argv) { (void)argc; (void)argv; return 2; }
int query_cmd_trend(int argc, char **argv) { (void)argc; (void)argv; return 2; }
int query_cmd_leaks(int argc, char **argv) { (void)argc; (void)argv; return 2; }
int query_cmd_discrepancy(int argc, char **argv) { (void)argc; (void)argv; return 2; }
