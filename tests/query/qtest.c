/* Helpers for the query tests (see qtest.h). */
#include "tests/query/qtest.h"

#include <dirent.h>
#include <ftw.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/ingest/ingest.h"

extern char **environ;

char *qt_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char *t = hp_xasprintf("%s/hfq.XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(t));
    return t;
}

static int remove_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void qt_tmpdir_remove(char *dir)
{
    if (!dir)
        return;
    /* Depth first, not following links: tests leave folders (go caches) too. */
    nftw(dir, remove_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

char *qt_path(const char *dir, const char *name)
{
    return hp_xasprintf("%s/%s", dir, name);
}

int qt_run(char *const argv[], char *const env[], const char *out_path)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        for (size_t i = 0; env && env[i]; i++)
            putenv(env[i]);
        int fd = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            _exit(126);
        dup2(fd, 1);
        int nul = open("/dev/null", O_WRONLY);
        if (nul >= 0 && !getenv("QT_VERBOSE"))
            dup2(nul, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *qt_jefixture(void)
{
    const char *p = getenv("JEFIXTURE");
    assert_non_null(p);
    return p;
}

int qt_jefixture_run(const char *dir, int lg_sample, const char *const *args,
                     const char *const *dumps, size_t ndumps)
{
    char *conf = hp_xasprintf("prof:true,prof_active:true,lg_prof_sample:%d", lg_sample);
    int rc = qt_jefixture_conf(dir, conf, args, dumps, ndumps);
    free(conf);
    return rc;
}

int qt_jefixture_conf(const char *dir, const char *malloc_conf, const char *const *args,
                      const char *const *dumps, size_t ndumps)
{
    char *argv[64];
    size_t n = 0;
    argv[n++] = (char *)qt_jefixture();
    for (size_t i = 0; args && args[i] && n < 40; i++)
        argv[n++] = (char *)args[i];
    char *paths[16];
    for (size_t i = 0; i < ndumps && i < 16; i++)
        argv[n++] = paths[i] = qt_path(dir, dumps[i]);
    argv[n] = NULL;
    char *conf = hp_xasprintf("MALLOC_CONF=%s", malloc_conf);
    char *env[] = { conf, NULL };
    int rc = qt_run(argv, env, NULL);
    for (size_t i = 0; i < ndumps && i < 16; i++)
        free(paths[i]);
    free(conf);
    return rc;
}

struct profile *qt_parse(const char *path)
{
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = ingest_parse_file(path, NULL, &p, &err);
    if (r < 0)
        fail_msg("parse %s: %s", path, err.len ? err.data : hp_strerror(r));
    hp_buf_release(&err);
    return p;
}

char *qt_slurp(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = hp_file_read(path, (size_t)1 << 28, &data, &len, &err);
    if (r < 0)
        fail_msg("read %s: %s", path, err.len ? err.data : hp_strerror(r));
    hp_buf_release(&err);
    char *s = hp_xmalloc(len + 1);
    memcpy(s, data, len);
    s[len] = '\0';
    free(data);
    return s;
}

size_t qt_symbolize(struct profile *p, const char *binary)
{
    char rp[4096];
    assert_non_null(realpath(binary, rp));
    char *dir = qt_tmpdir();
    char *in = qt_path(dir, "addrs"), *outp = qt_path(dir, "names");
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    uint32_t *which = hp_xcalloc(p->nlocs + 1, sizeof(*which));
    size_t n = 0;
    for (size_t i = 0; i < p->nlocs; i++) {
        struct profile_location *l = &p->locs[i];
        if (!l->mapping)
            continue;
        const struct profile_mapping *m = &p->mappings[l->mapping - 1];
        if (strstr(m->path, "libjemalloc"))
            l->flags |= PROFILE_LOC_ALLOCATOR;
        if (strcmp(m->path, rp) != 0) {
            /* Other objects: a name stable across processes (ASLR moves
             * the runtime address), "libc.so.6+0x278eb". */
            const char *base = strrchr(m->path, '/');
            char name[256];
            snprintf(name, sizeof(name), "%s+0x%llx", base ? base + 1 : m->path,
                     (unsigned long long)(l->address - m->start + m->offset));
            struct profile_frame fr = { .function = name };
            profile_location_set_frames(p, (uint32_t)i, &fr, 1);
            continue;
        }
        /* For a PIE built by the default linker the executable segment's
         * file offset equals its virtual address. */
        fprintf(f, "0x%llx\n", (unsigned long long)(l->address - m->start + m->offset));
        which[n++] = (uint32_t)i;
    }
    fclose(f);
    char *argv[] = { "sh", "-c", NULL, NULL };
    argv[2] = hp_xasprintf("addr2line -f -e '%s' < '%s'", rp, in);
    assert_int_equal(qt_run(argv, NULL, outp), 0);
    free(argv[2]);
    char *text = qt_slurp(outp);
    /* addr2line prints two lines per address: function, then file:line. */
    char *line = text;
    size_t named = 0;
    for (size_t k = 0; k < n && *line; k++) {
        char *nl = strchr(line, '\n');
        if (!nl)
            break;
        *nl = '\0';
        if (strcmp(line, "??") != 0) {
            struct profile_frame fr = { .function = line };
            profile_location_set_frames(p, which[k], &fr, 1);
            named++;
        }
        char *next = strchr(nl + 1, '\n');
        if (!next)
            break;
        line = next + 1;
    }
    free(text);
    free(which);
    unlink(in);
    unlink(outp);
    free(in);
    free(outp);
    qt_tmpdir_remove(dir);
    return named;
}

void qt_flag_allocator(struct profile *p)
{
    for (size_t i = 0; i < p->nlocs; i++) {
        struct profile_location *l = &p->locs[i];
        if (l->mapping && strstr(p->mappings[l->mapping - 1].path, "libjemalloc"))
            l->flags |= PROFILE_LOC_ALLOCATOR;
    }
}

struct query_folded *qt_fold(const struct profile *p)
{
    struct query_opts o;
    query_opts_init(&o);
    struct query_folded *f = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_fold(p, &o, &f, &err), 0);
    hp_buf_release(&err);
    return f;
}
