/* Reliability of the store under hard failures, on real files:
 *  - a writer killed with SIGKILL at random points of a long import leaves a
 *    database that passes integrity_check and holds every snapshot whose
 *    commit had returned (many rounds, one database);
 *  - a full disk (a file size limit, and a real 1 MiB tmpfs when we may
 *    mount one) gives a clear error and leaves the database usable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/gen.h"

#define HOUR_MS INT64_C(3600000)
#define T0 INT64_C(1763798400000)
#define NVARIANTS 4

struct fx {
    char dir[64];
    char db[128];
    struct profile *p[NVARIANTS];
    char *raw[NVARIANTS];
    size_t raw_len[NVARIANTS];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/hf-crash-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/t.db", f->dir);
    for (int i = 0; i < NVARIANTS; i++) {
        struct gen_params gp = { .seed = 11, .nstacks = 400, .nfuncs = 200, .hour = (uint32_t)i,
                                 .nthreads = 2, .symbolize = true };
        f->p[i] = gen_profile(&gp, &f->raw[i], &f->raw_len[i]);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < NVARIANTS; i++) {
        profile_free(f->p[i]);
        free(f->raw[i]);
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* The raw dump inserted at hour h: variant h % NVARIANTS and a line with h. */
static char *crash_raw(struct fx *f, int64_t h, size_t *ret_len)
{
    char *raw = hp_xasprintf("%s# hour %lld\n", f->raw[h % 1000 % NVARIANTS], (long long)h);
    *ret_len = strlen(raw);
    return raw;
}

/* Child: insert snapshots forever, reporting each committed id on fd. */
static void writer_child(struct fx *f, const char *db, int fd, int round)
{
    struct store *s;
    struct hp_buf err = HP_BUF_INIT(0);
    if (store_open(db, STORE_OPEN_WRITE, &s, &err) < 0) {
        fprintf(stderr, "child open: %s\n", err.data);
        _exit(3);
    }
    struct store_node_info ni = { .name = round % 2 ? "be-odd" : "be-even" };
    int64_t node;
    if (store_node_upsert(s, &ni, &node, &err) < 0)
        _exit(4);
    for (int64_t i = 0;; i++) {
        int64_t id;
        int v = (int)(i % NVARIANTS);
        int r;
        if (i % 7 == 6)
            r = store_snapshot_attempt_record(s, node, T0 + (round * 1000 + i) * HOUR_MS,
                                              STORE_STATUS_FETCH_FAILED, "timeout", NULL, 0,
                                              NULL, NULL, 0, &id, &err);
        else {
            /* Distinct dumps, so each is a new link of the node's delta chain. */
            size_t len;
            char *raw = crash_raw(f, round * 1000 + i, &len);
            r = store_snapshot_insert(s, node, T0 + (round * 1000 + i) * HOUR_MS, f->p[v], raw,
                                      len, NULL, NULL, 0, &id, &err);
            free(raw);
        }
        if (r < 0) {
            fprintf(stderr, "child insert: %s\n", err.data);
            _exit(5);
        }
        /* The commit returned: from here on the snapshot must survive. */
        if (write(fd, &id, sizeof(id)) != sizeof(id))
            _exit(6);
    }
}

static void test_store_crash_sigkill_keeps_commits(void **state)
{
    struct fx *f = *state;
    unsigned seed = (unsigned)time(NULL);
    fprintf(stderr, "seed %u\n", seed);
    srand(seed);
    int64_t *all = NULL;
    size_t nall = 0, cap = 0;
    for (int round = 0; round < 24; round++) {
        size_t round_first = nall;
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            writer_child(f, f->db, fds[1], round);
        }
        close(fds[1]);
        /* Wait (with a deadline) for a random number of commits, then kill
         * after a random extra delay, anywhere inside the next insert. */
        int want = rand() % 4;
        int got = 0;
        uint64_t deadline = hp_now_ns() + UINT64_C(20000000000);
        while (got < want && hp_now_ns() < deadline) {
            struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
            if (poll(&pfd, 1, 100) == 1) {
                int64_t id;
                ssize_t n = read(fds[0], &id, sizeof(id));
                if (n != sizeof(id))
                    break;
                all = hp_xgrow(all, &cap, nall + 1, sizeof(*all));
                all[nall++] = id;
                got++;
            }
        }
        struct timespec ts = { 0, (rand() % 15000) * 1000L };
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFEXITED(status))
            fprintf(stderr, "child exited %d\n", WEXITSTATUS(status));
        assert_true(WIFSIGNALED(status));
        int64_t id;
        while (read(fds[0], &id, sizeof(id)) == sizeof(id)) {
            all = hp_xgrow(all, &cap, nall + 1, sizeof(*all));
            all[nall++] = id;
        }
        close(fds[0]);

        /* Every committed snapshot is there, whole, and the file is sound. */
        struct store *s;
        struct hp_buf err = HP_BUF_INIT(0);
        int r = store_open(f->db, STORE_OPEN_WRITE, &s, &err);
        if (r < 0)
            fprintf(stderr, "reopen: %s\n", err.data);
        assert_int_equal(r, 0);
        r = store_check(s, &err);
        if (r < 0)
            fprintf(stderr, "check: %s\n", err.data);
        assert_int_equal(r, 0);
        for (size_t i = 0; i < nall; i++) {
            struct store_snapshot_info si;
            r = store_snapshot_info(s, all[i], &si, &err);
            if (r < 0)
                fprintf(stderr, "round %d: committed #%lld lost: %s\n", round,
                        (long long)all[i], err.data);
            assert_int_equal(r, 0);
        }
        /* Every dump committed in this round reads back byte for byte,
         * whatever link of its chain the kill interrupted; after the last
         * round, every dump of all rounds (later kills broke nothing). */
        for (size_t i = round == 23 ? 0 : round_first; i < nall; i++) {
            struct store_snapshot_info si;
            assert_int_equal(store_snapshot_info(s, all[i], &si, NULL), 0);
            if (si.status != STORE_STATUS_OK)
                continue;
            size_t exp_len;
            char *exp = crash_raw(f, (si.taken_at - T0) / HOUR_MS, &exp_len);
            void *data;
            size_t data_len;
            r = store_snapshot_raw(s, all[i], &data, &data_len, &err);
            if (r < 0)
                fprintf(stderr, "raw #%lld: %s\n", (long long)all[i], err.data);
            assert_int_equal(r, 0);
            assert_int_equal(data_len, exp_len);
            assert_memory_equal(data, exp, exp_len);
            free(data);
            free(exp);
        }
        /* The newest committed ok snapshot loads and equals what went in. */
        for (size_t i = nall; i-- > 0;) {
            struct store_snapshot_info si;
            assert_int_equal(store_snapshot_info(s, all[i], &si, NULL), 0);
            if (si.status != STORE_STATUS_OK)
                continue;
            struct profile *p;
            assert_int_equal(store_snapshot_load(s, all[i], &p, &err), 0);
            /* The child inserted variant i % NVARIANTS at hour round*1000+i. */
            int v = (int)(((si.taken_at - T0) / HOUR_MS) % 1000 % NVARIANTS);
            char *a = gen_canon(f->p[v]), *b = gen_canon(p);
            assert_string_equal(a, b);
            free(a);
            free(b);
            profile_free(p);
            break;
        }
        store_close(s);
        hp_buf_release(&err);
    }
    fprintf(stderr, "%zu committed snapshots survived 24 kills\n", nall);
    assert_true(nall > 0);
    free(all);
}

/* In a child: write until the disk is full; check the error, then that the
 * same handle still reads and the database is sound. Exit 0 when all held. */
static int fill_until_full(struct fx *f, const char *db, int want)
{
    struct store *s;
    struct hp_buf err = HP_BUF_INIT(0);
    if (store_open(db, STORE_OPEN_WRITE, &s, &err) < 0) {
        fprintf(stderr, "open: %s\n", err.data);
        return 10;
    }
    struct store_node_info ni = { .name = "be-full" };
    int64_t node, first = 0, id;
    if (store_node_upsert(s, &ni, &node, &err) < 0)
        return 11;
    int r = 0;
    for (int i = 0; i < 5000; i++) {
        /* Distinct raw bytes each time so every insert needs new pages. */
        char *raw = hp_xasprintf("%s\n# %d\n", f->raw[i % NVARIANTS], i);
        hp_buf_reset(&err);
        r = store_snapshot_insert(s, node, T0 + i * HOUR_MS, f->p[i % NVARIANTS], raw,
                                  strlen(raw), NULL, NULL, 0, &id, &err);
        free(raw);
        if (r < 0)
            break;
        if (!first)
            first = id;
    }
    if (r == 0) {
        fprintf(stderr, "never filled up\n");
        return 12;
    }
    fprintf(stderr, "full disk error (%s): %s\n", hp_strerror(r), err.data);
    if (r != want)
        return 13;
    if (!strstr(err.data, db))
        return 14; /* the message must name the database */
    if (!first)
        return 15;
    struct profile *p;
    hp_buf_reset(&err);
    if (store_snapshot_load(s, first, &p, &err) < 0) {
        fprintf(stderr, "load after full: %s\n", err.data);
        return 16;
    }
    profile_free(p);
    if (store_check(s, &err) < 0) {
        fprintf(stderr, "check after full: %s\n", err.data);
        return 17;
    }
    store_close(s);
    hp_buf_release(&err);
    return 0;
}

static void after_full_usable(struct fx *f, const char *db, bool can_write)
{
    struct store *s;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_open(db, can_write ? STORE_OPEN_WRITE : STORE_OPEN_READ, &s, &err);
    if (r < 0)
        fprintf(stderr, "reopen: %s\n", err.data);
    assert_int_equal(r, 0);
    assert_int_equal(store_check(s, &err), 0);
    int64_t id;
    assert_int_equal(store_selector_resolve(s, "be-full@now", T0 - 1, &id, NULL), HP_ENOTFOUND);
    assert_int_equal(store_selector_resolve(s, "be-full", INT64_MAX, &id, NULL), 0);
    struct profile *p;
    assert_int_equal(store_snapshot_load(s, id, &p, NULL), 0);
    profile_free(p);
    if (can_write) {
        int64_t node;
        struct store_node_info ni = { .name = "be-full" };
        assert_int_equal(store_node_upsert(s, &ni, &node, NULL), 0);
        r = store_snapshot_insert(s, node, T0 - HOUR_MS, f->p[0], NULL, 0, NULL, NULL, 0, &id,
                                  &err);
        if (r < 0)
            fprintf(stderr, "insert after: %s\n", err.data);
        assert_int_equal(r, 0);
    }
    store_close(s);
    hp_buf_release(&err);
}

static void test_store_full_disk_file_size_limit(void **state)
{
    struct fx *f = *state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN); /* get EFBIG from write(), not a signal */
        struct rlimit rl = { 2 << 20, 2 << 20 };
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(20);
        /* SQLite reports a refused write (EFBIG) as an I/O error. */
        _exit(fill_until_full(f, f->db, HP_ERR(EIO)));
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* Without the limit the same file takes writes again. */
    after_full_usable(f, f->db, true);
}

static void test_store_full_disk_tmpfs(void **state)
{
    struct fx *f = *state;
    char mnt[160], db[200];
    snprintf(mnt, sizeof(mnt), "%s/tmpfs", f->dir);
    assert_int_equal(mkdir(mnt, 0700), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0) {
        fprintf(stderr, "cannot mount a tmpfs (%s); the file size limit test covers this\n",
                strerror(errno));
        skip();
    }
    snprintf(db, sizeof(db), "%s/full.db", mnt);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(fill_until_full(f, db, HP_ERR(ENOSPC)));
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    after_full_usable(f, db, false);
    assert_int_equal(umount(mnt), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_crash_sigkill_keeps_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_full_disk_file_size_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_full_disk_tmpfs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
