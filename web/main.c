/* hf-web: the web server alone, over a folder of profile files, for
 * development, demos and tests (the collector runs the same server on its
 * own loop, over its store).
 *
 *   hf-web --dir DIR [--listen 127.0.0.1:7070] [--static DIR] [--token-file F]
 *
 * Prints "listening on http://HOST:PORT/" once bound (port 0 picks one), then
 * serves until SIGINT/SIGTERM, when it stops cleanly and exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "store/hp-opt.h"
#include "web/folder/folder.h"

struct app {
    uv_signal_t sigint, sigterm;
    struct web_server *server;
};

static void stopped_cb(void *arg)
{
    struct app *a = arg;
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->sigterm, NULL);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    struct app *a = h->data;
    hp_log_info("web", "signal=%d msg=\"stopping\"", signum);
    if (a->server) {
        web_server_stop(a->server, stopped_cb, a);
        a->server = NULL;
    }
}

int main(int argc, char **argv)
{
    struct web_config cfg;
    web_config_init(&cfg);
    const char *dir = NULL, *token_file = NULL, *static_dir = cfg.static_dir;
    struct hp_buf allowed = HP_BUF_INIT(0); /* --allowed-host, comma-joined */
    static const struct hp_opt_usage usage = {
        "hf-web", "hf-web --dir DIR [options]",
        "Serves heapfleet's API and UI over a folder: DIR/NODE/FILE is a snapshot of\n"
        "NODE taken at FILE's mtime.",
        NULL,
    };
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "dir", &dir, "DIR", "the folder of nodes' profile files (required)"),
        HP_OPT_STRING(0, "listen", &cfg.listen, "HOST:PORT", "where to answer (port 0 picks one)"),
        HP_OPT_STRING(0, "static", &static_dir, "DIR", "the UI's files (none: API only)"),
        HP_OPT_STRING(0, "token-file", &token_file, "FILE",
                      "require \"Authorization: Bearer <token>\" (not for /metrics)"),
        HP_OPT_CALLBACK(0, "allowed-host", &allowed, "NAME",
                        "without a token, also answer Host: NAME (besides IP\n"
                        "addresses and localhost); repeatable",
                        hp_opt_name_list_cb, NULL),
        HP_OPT_LOG_LEVEL(),
        HP_OPT_END(),
    };
    int rc = 1, npos = hp_opt_parse(&usage, opts, argc, argv, NULL, &rc);
    if (npos < 0) {
        hp_buf_release(&allowed);
        return rc;
    }
    if (npos > 0 || !dir) {
        hp_buf_release(&allowed);
        return npos > 0 ? hp_opt_usage_error(&usage, "unexpected argument \"%s\"", argv[0])
                        : hp_opt_usage_error(&usage, "--dir is required");
    }
    cfg.static_dir = static_dir && strcmp(static_dir, "none") == 0 ? NULL : static_dir;
    cfg.allowed_hosts = allowed.len ? allowed.data : NULL;
    signal(SIGPIPE, SIG_IGN);
    struct hp_buf err = HP_BUF_INIT(0);
    char *token = NULL;
    struct web_source_dir *src = NULL;
    rc = 1;
    if (token_file && web_token_read(token_file, &token, &err) < 0)
        goto out;
    cfg.token = token;
    if (web_source_dir_new(dir, &src, &err) < 0)
        goto out;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct app app = { 0 };
    if (web_server_start(&loop, &cfg, &web_source_dir_ops, src, &app.server, &err) < 0) {
        uv_run(&loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&loop);
        goto out;
    }
    uv_signal_init(&loop, &app.sigint);
    uv_signal_init(&loop, &app.sigterm);
    app.sigint.data = app.sigterm.data = &app;
    uv_signal_start(&app.sigint, signal_cb, SIGINT);
    uv_signal_start(&app.sigterm, signal_cb, SIGTERM);
    const char *host = cfg.listen;
    const char *colon = strrchr(host, ':');
    printf("listening on http://%.*s:%d/\n", (int)(colon - host), host,
           web_server_port(app.server));
    fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
    int cr = uv_loop_close(&loop);
    if (cr != 0)
        fprintf(stderr, "hf-web: loop not empty at exit: %s\n", uv_strerror(cr));
    rc = cr != 0;
out:
    if (err.len)
        fprintf(stderr, "hf-web: %s\n", err.data);
    web_source_dir_free(src);
    free(token);
    hp_buf_release(&allowed);
    hp_buf_release(&err);
    return rc;
}
