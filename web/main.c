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

static int usage(void)
{
    fprintf(stderr, "usage: hf-web --dir DIR [--listen HOST:PORT] [--static DIR] "
                    "[--token-file FILE] [--allowed-host NAME]...\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct web_config cfg;
    web_config_init(&cfg);
    const char *dir = NULL, *token_file = NULL;
    struct hp_buf allowed = HP_BUF_INIT(0); /* --allowed-host, comma-joined */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("hf-web --dir DIR [--listen HOST:PORT] [--static DIR|none] "
                   "[--token-file FILE] [--allowed-host NAME]...\n\n"
                   "Serves heapfleet's API and UI over a folder: DIR/NODE/FILE is a snapshot of\n"
                   "NODE taken at FILE's mtime. Default listen 127.0.0.1:7070.\n");
            return 0;
        }
        if (i + 1 >= argc)
            return usage();
        if (strcmp(a, "--dir") == 0)
            dir = argv[++i];
        else if (strcmp(a, "--listen") == 0)
            cfg.listen = argv[++i];
        else if (strcmp(a, "--static") == 0)
            cfg.static_dir = strcmp(argv[i + 1], "none") == 0 ? NULL : argv[i + 1], i++;
        else if (strcmp(a, "--token-file") == 0)
            token_file = argv[++i];
        else if (strcmp(a, "--allowed-host") == 0 && argv[i + 1][0] && !strchr(argv[i + 1], ','))
            (void)hp_buf_printf(&allowed, "%s%s", allowed.len ? "," : "", argv[++i]);
        else
            return usage();
    }
    if (!dir)
        return usage();
    cfg.allowed_hosts = allowed.len ? allowed.data : NULL;
    signal(SIGPIPE, SIG_IGN);
    struct hp_buf err = HP_BUF_INIT(0);
    char *token = NULL;
    struct web_source_dir *src = NULL;
    int rc = 1;
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
