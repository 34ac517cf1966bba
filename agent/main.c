/* agent: command line of the node-side helper (see agent.1 and
 * deploy/OPERATING.md). Parses options, then hands over to agent_run(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent-internal.h"
#include "store/hp-opt.h"

static const struct hp_opt_usage usage = {
    .prog = "agent",
    .usage = "agent --dumps DIR[,DIR...] [options]",
    .text = "Serve the heap dumps in DIR (read-only) and binaries by build-id to the\n"
            "heapfleet collector.\n",
    .after = "Endpoints (GET): /health, /dumps[?prefix=P], /dumps/newest[?prefix=P],\n"
             "/dumps/file?name=NAME, /dumps/file?path=ABSPATH, /identity?path=ABSPATH,\n"
             "/proc, /buildid/HEX/executable, /buildid/HEX/debuginfo (debuginfod protocol).\n",
};

static int version_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    *(bool *)o->value = true;
    return 0;
}

int main(int argc, char **argv)
{
    struct agent_config cfg = { .listen = "127.0.0.1:7071", .keep_every_s = 60,
                                  .keep = AGENT_KEEP_DEFAULT };
    struct hp_buf err = HP_BUF_INIT(0);
    int64_t keep_every = cfg.keep_every_s;
    bool version = false;
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "dumps", &cfg.dumps, "DIR[,DIR...]",
                      "folders holding heap dumps (jemalloc prof_prefix,\n"
                      "Doris jeprofile_dir, RisingWave heap_profiling.dir)"),
        HP_OPT_STRING(0, "listen", &cfg.listen, "ADDR",
                      "address to listen on ([::]:7071 for IPv6;\n"
                      "port 0 picks one and logs it); other than loopback\n"
                      "only with --token-file"),
        HP_OPT_BOOL(0, "insecure-listen", &cfg.insecure_listen,
                    "allow a non-loopback --listen without a token"),
        HP_OPT_STRING(0, "token-file", &cfg.token_file, "FILE",
                      "require 'Authorization: Bearer <token>' (first line of FILE)"),
        HP_OPT_STRING(0, "tls-cert", &cfg.tls_cert, "FILE",
                      "serve HTTPS with this PEM certificate (chain)"),
        HP_OPT_STRING(0, "tls-key", &cfg.tls_key, "FILE",
                      "the certificate's private key (default: in --tls-cert)"),
        HP_OPT_STRING(0, "pid-file", &cfg.pid_file, "FILE",
                      "pid of the profiled process for GET /proc and whose\n"
                      "mapped files are served (default: the newest dumps'\n"
                      "processes still running)"),
        HP_OPT_STRING(0, "binaries", &cfg.binaries, "PATH[,...]",
                      "extra binaries or folders of binaries/debug files to\n"
                      "serve by build-id (besides the files the watched\n"
                      "running processes map)"),
        HP_OPT_UINT(0, "keep", &cfg.keep, 0, 1000000, "N",
                    "delete all but the newest N dumps per prefix and folder\n"
                    "(0: off)"),
        HP_OPT_CALLBACK(0, "keep-every", &keep_every, "DURATION", "how often to apply --keep",
                        hp_opt_duration_cb, hp_opt_duration_show),
        HP_OPT_LOG_LEVEL(),
        HP_OPT_CALLBACK_F(0, "version", &version, NULL, "print the version", version_cb, NULL,
                          HP_OPT_NOARG, 0),
        HP_OPT_END(),
    };
    int rc = 1, npos = hp_opt_parse(&usage, opts, argc, argv, NULL, &rc);
    if (npos < 0)
        return rc;
    if (version) {
        puts("agent (heapfleet) " HEAPFLEET_VERSION);
        return 0;
    }
    if (npos > 0)
        return hp_opt_usage_error(&usage, "unexpected argument \"%s\"", argv[0]);
    if (!cfg.dumps)
        return hp_opt_usage_error(&usage, "--dumps is required");
    if (keep_every < 1 || keep_every > 86400 * 7)
        return hp_opt_usage_error(&usage, "--keep-every: expected a duration from 1s to 7d");
    cfg.keep_every_s = (unsigned)keep_every;
    rc = 1;
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
