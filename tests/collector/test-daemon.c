/* Unit tests for the daemon's seams: a custom sink receives one result per
 * node (on a worker thread), a service hooked onto the loop is started and
 * stopped, and a failing service stops the start-up cleanly. The "node" is a
 * loopback port that is bound but not listening, so it refuses at once. */
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "collector/daemon.h"
#include "collector/poll/poll.h"

struct test_sink {
    struct collector_sink sink;
    int records, closes;
    int last_status;
    char last_error[512];
    char last_node[64];
    size_t last_attempts;
    bool on_loop_thread;
    uv_thread_t loop_thread;
};

static int test_sink_record(struct collector_sink *s, const struct collector_result *r,
                            struct hp_buf *err)
{
    struct test_sink *ts = hp_container_of(s, struct test_sink, sink);
    uv_thread_t self = uv_thread_self();
    ts->on_loop_thread |= uv_thread_equal(&self, &ts->loop_thread);
    ts->records++;
    ts->last_status = r->status;
    snprintf(ts->last_error, sizeof(ts->last_error), "%s", r->error ? r->error : "");
    snprintf(ts->last_node, sizeof(ts->last_node), "%s", r->node->name);
    ts->last_attempts = r->nattempts;
    return 0;
}

static void test_sink_close(struct collector_sink *s)
{
    struct test_sink *ts = hp_container_of(s, struct test_sink, sink);
    ts->closes++;
}

struct test_service {
    struct collector_service svc;
    uv_timer_t timer;
    int starts, stops;
    int fail;
};

static int svc_start(struct collector_service *s, struct uv_loop_s *loop,
                     struct collector_daemon *d, struct hp_buf *err)
{
    assert_non_null(d);
    struct test_service *t = hp_container_of(s, struct test_service, svc);
    t->starts++;
    if (t->fail) {
        hp_err_printf(err, "listen 127.0.0.1:1: address in use");
        return HP_ERR(98);
    }
    assert_non_null(loop);
    return uv_timer_init(loop, &t->timer);
}

static void svc_stop(struct collector_service *s)
{
    struct test_service *t = hp_container_of(s, struct test_service, svc);
    t->stops++;
    uv_close((uv_handle_t *)&t->timer, NULL);
}

/* A port that refuses connections: bound, never listening. */
static int refusing_port(int *ret_fd)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof(a);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *ret_fd = fd;
    return ntohs(a.sin_port);
}

static char *write_list(const char *text)
{
    char *path = hp_xstrdup("/tmp/hp-test-daemon-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void config_for_test(struct collector_config *c, const char *path)
{
    collector_config_default(c);
    c->nodes_path = path;
    c->once = true;
    c->retries = 0;
    c->progress = false;
    c->timeout_ms = 2000;
}

static void test_daemon_sink_gets_every_node_off_the_loop(void **state)
{
    int fd;
    int port = refusing_port(&fd);
    char *text = hp_xasprintf("starrocks 127.0.0.1:%d name=down-1\n", port);
    char *path = write_list(text);
    struct test_sink ts = { .sink = { test_sink_record, test_sink_close } };
    struct test_service svc = { .svc = { svc_start, svc_stop } };
    ts.loop_thread = uv_thread_self(); /* collector_daemon_run runs its loop here */
    struct collector_config c;
    config_for_test(&c, path);
    c.service = &svc.svc;
    int rc = collector_daemon_run(&c, &ts.sink, NULL);
    assert_int_equal(rc, 1); /* --once with a failed node */
    assert_int_equal(ts.records, 1);
    assert_int_equal(ts.closes, 1);
    assert_false(ts.on_loop_thread);
    assert_string_equal(ts.last_node, "down-1");
    assert_true(ts.last_status < 0);
    assert_non_null(strstr(ts.last_error, "connection refused"));
    assert_int_equal(ts.last_attempts, 2); /* /metrics, then the dump */
    assert_int_equal(svc.starts, 1);
    assert_int_equal(svc.stops, 1);
    unlink(path);
    free(path);
    free(text);
    close(fd);
}

static void test_daemon_failing_service_stops_startup(void **state)
{
    char *path = write_list("url http://127.0.0.1:9/x name=u\n");
    struct test_sink ts = { .sink = { test_sink_record, test_sink_close } };
    struct test_service svc = { .svc = { svc_start, svc_stop }, .fail = 1 };
    struct collector_config c;
    config_for_test(&c, path);
    c.service = &svc.svc;
    assert_int_equal(collector_daemon_run(&c, &ts.sink, NULL), 2);
    assert_int_equal(svc.starts, 1);
    assert_int_equal(svc.stops, 0); /* never started */
    assert_int_equal(ts.records, 0);
    assert_int_equal(ts.closes, 1);
    unlink(path);
    free(path);
}

static void test_daemon_strict_refuses_bad_list(void **state)
{
    char *path = write_list("starrocks 127.0.0.1:1\nnot a node\n");
    struct test_sink ts = { .sink = { test_sink_record, test_sink_close } };
    struct collector_config c;
    config_for_test(&c, path);
    c.strict = true;
    assert_int_equal(collector_daemon_run(&c, &ts.sink, NULL), 2);
    assert_int_equal(ts.records, 0);
    assert_int_equal(ts.closes, 1);
    unlink(path);
    free(path);
}

int main(void)
{
    hp_log_set_level(HP_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_daemon_sink_gets_every_node_off_the_loop),
        cmocka_unit_test(test_daemon_failing_service_stops_startup),
        cmocka_unit_test(test_daemon_strict_refuses_bad_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
