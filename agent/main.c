/* agent: command line of the node-side helper (see agent.1 and
 * deploy/OPERATING.md). Parses options, then hands over to agent_run(). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent-internal.h"

static const char usage[] =
    "Usage: agent --dumps DIR[,DIR...] [options]\n"
    "\n"
    "Serve the heap dumps in DIR (read-only) and binaries by build-id to the\n"
    "heapfleet collector.\n"
    "\n"
    "  --dumps DIR[,DIR...]   folders holding heap dumps (jemalloc prof_prefix,\n"
    "                         Doris jeprofile_dir, RisingWave heap_profiling.dir)\n"
    "  --listen ADDR          address to listen on (default 0.0.0.0:7071;\n"
    "                         [::]:7071 for IPv6; port 0 picks one and logs it)\n"
    "  --token-file FILE      require 'Authorization: Bearer <token>' (first line of FILE)\n"
    "  --pid-file FILE        pid of the profiled process for GET /proc\n"
    "                         (default: the newest dump whose name has a live pid)\n"
    "  --binaries PATH[,...]  extra binaries or folders of binaries/debug files to\n"
    "                         serve by build-id (besides those mapped by dumps)\n"
    "  --keep N               delete all but the newest N dumps per prefix (off by default)\n"
    "  --keep-every DURATION  how often to apply --keep (default 60s)\n"
    "  --log-level LEVEL      error, warn, info (default) or debug\n"
    "  --help, --version\n"
    "\n"
    "Endpoints (GET): /health, /dumps[?prefix=P], /dumps/newest[?prefix=P],\n"
    "/dumps/file?name=NAME, /dumps/file?path=ABSPATH, /identity?path=ABSPATH,\n"
    "/proc, /buildid/HEX/executable, /buildid/HEX/debuginfo (debuginfod protocol).\n";

int main(int argc, char **argv)
{
    enum { O_DUMPS = 256, O_LISTEN, O_TOKEN, O_PID, O_BIN, O_KEEP, O_KEEP_EVERY, O_LOG, O_HELP,
           O_VERSION };
    static const struct option opts[] = {
        { "dumps", required_argument, NULL, O_DUMPS },
        { "listen", required_argument, NULL, O_LISTEN },
        { "token-file", required_argument, NULL, O_TOKEN },
        { "pid-file", required_argument, NULL, O_PID },
        { "binaries", required_argument, NULL, O_BIN },
        { "keep", required_argument, NULL, O_KEEP },
        { "keep-every", required_argument, NULL, O_KEEP_EVERY },
        { "log-level", required_argument, NULL, O_LOG },
        { "help", no_argument, NULL, O_HELP },
        { "version", no_argument, NULL, O_VERSION },
        { 0 },
    };
    struct agent_config cfg = { .listen = "0.0.0.0:7071", .keep_every_s = 60 };
    struct hp_buf err = HP_BUF_INIT(0);
    int c, rc = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        uint64_t v;
        int64_t secs;
        enum hp_log_level lvl;
        switch (c) {
        case O_DUMPS:
            cfg.dumps = optarg;
            break;
        case O_LISTEN:
            cfg.listen = optarg;
            break;
        case O_TOKEN:
            cfg.token_file = optarg;
            break;
        case O_PID:
            cfg.pid_file = optarg;
            break;
        case O_BIN:
            cfg.binaries = optarg;
            break;
        case O_KEEP:
            if (hp_parse_u64(optarg, strlen(optarg), &v) < 0 || v > 1000000) {
                fprintf(stderr, "agent: --keep %s: expected a count (0 = off)\n", optarg);
                return 2;
            }
            cfg.keep = (unsigned)v;
            break;
        case O_KEEP_EVERY:
            if (hp_parse_duration(optarg, &secs) < 0 || secs < 1 || secs > 86400 * 7) {
                fprintf(stderr, "agent: --keep-every %s: expected a duration like 60s or 5m\n",
                        optarg);
                return 2;
            }
            cfg.keep_every_s = (unsigned)secs;
            break;
        case O_LOG:
            if (hp_log_level_parse(optarg, &lvl) < 0) {
                fprintf(stderr, "agent: --log-level %s: expected error, warn, info or debug\n",
                        optarg);
                return 2;
            }
            hp_log_set_level(lvl);
            break;
        case O_HELP:
            fputs(usage, stdout);
            return 0;
        case O_VERSION:
            puts("agent (heapfleet) " HEAPFLEET_VERSION);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind != argc || !cfg.dumps) {
        fputs(!cfg.dumps ? "agent: --dumps is required\n" : "agent: unexpected argument\n",
              stderr);
        fputs(usage, stderr);
        return 2;
    }
    int r = agent_run(&cfg, &err);
    if (r < 0) {
        struct hp_buf v = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&v, err.len ? err.data : hp_strerror(r));
        hp_log_error("agent", "err=%s msg=\"cannot start\"", v.data);
        hp_buf_release(&v);
    } else
        rc = 0;
    hp_buf_release(&err);
    return rc;
}
