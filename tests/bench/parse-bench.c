/* Parse benchmark: MB/s of the jemalloc heap_v2 reader on a large dump, beside
 * jeprof on the same file in the same run.
 *
 *   parse-bench JEFIXTURE OUTDIR [--mb 64] [--no-jeprof] [--smoke]
 *
 * The large dump is built from a real fixture dump's shapes: its header,
 * thread lines and MAPPED_LIBRARIES are kept, and its stacks are repeated
 * with addresses moved within their own mappings (so every stack is distinct
 * and still maps), until the file holds at least --mb MiB and 200k stacks.
 * --smoke: a 1 MiB, 2,000-stack dump and two runs (CI: suite bench-smoke).
 * "RESULT<tab>" lines are what tests/bench/run-all tabulates. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/ingest/ingest.h"

static double now_s(void)
{
    return (double)hp_now_ns() / 1e9;
}

/* CPU time of this process: on a busy machine wall time measures the
 * neighbours; both are printed. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Write the big dump: returns its size. */
static size_t build_big(const char *seed_path, const char *out_path, size_t min_mb,
                        size_t min_stacks, size_t *ret_stacks)
{
    char *seed;
    size_t len;
    struct hp_buf err = HP_BUF_INIT(0);
    if (hp_file_read(seed_path, 0, &seed, &len, &err) < 0) {
        fprintf(stderr, "%s\n", err.data);
        exit(1);
    }
    struct profile *p = NULL;
    if (ingest_parse(seed, len, NULL, &p, &err) < 0) {
        fprintf(stderr, "seed: %s\n", err.data);
        exit(1);
    }
    const char *maps = strstr(seed, "\nMAPPED_LIBRARIES:");
    const char *first_at = strstr(seed, "\n@");
    FILE *f = fopen(out_path, "w");
    if (!f || !maps || !first_at) {
        fprintf(stderr, "cannot write %s or seed lacks sections\n", out_path);
        exit(1);
    }
    fwrite(seed, 1, (size_t)(first_at - seed) + 1, f); /* header + thread lines */
    size_t written = (size_t)(first_at - seed) + 1, stacks = 0;
    while (written < min_mb << 20 || stacks < min_stacks) {
        for (size_t si = 0; si < p->nsamples; si++) {
            const struct profile_sample *s = &p->samples[si];
            const struct profile_stack *st = &p->stacks[s->stack];
            const uint32_t *locs = profile_stack_locs(p, s->stack);
            char line[8192];
            size_t o = 0;
            line[o++] = '@';
            for (uint32_t k = 0; k < st->n && o < sizeof(line) - 64; k++) {
                const struct profile_location *l = &p->locs[locs[k]];
                uint64_t a = l->address + (k ? 1 : 0);
                if (l->mapping && k >= 3) {
                    /* A pool of 16k call sites per mapping: stacks are all
                     * distinct, addresses repeat as in a real binary. */
                    const struct profile_mapping *m = &p->mappings[l->mapping - 1];
                    uint64_t span = m->limit - m->start;
                    a = m->start + (next_rand() % 16384) * (span / 16384 + 1) % span;
                }
                o += (size_t)snprintf(line + o, sizeof(line) - o, " 0x%llx",
                                      (unsigned long long)a);
            }
            line[o++] = '\n';
            fwrite(line, 1, o, f);
            written += o;
            int n = fprintf(f, "  t*: %lld: %lld [%lld: %lld]\n  t0: %lld: %lld [%lld: %lld]\n",
                            (long long)s->raw[0], (long long)s->raw[1], (long long)s->raw[2],
                            (long long)s->raw[3], (long long)s->raw[0], (long long)s->raw[1],
                            (long long)s->raw[2], (long long)s->raw[3]);
            written += (size_t)n;
            stacks++;
        }
    }
    fwrite(maps, 1, len - (size_t)(maps - seed), f);
    written += len - (size_t)(maps - seed);
    fclose(f);
    profile_free(p);
    free(seed);
    hp_buf_release(&err);
    *ret_stacks = stacks;
    return written;
}

static double time_cmd(const char *cmd, long *ret_maxrss_kb)
{
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0)
        return -1;
    *ret_maxrss_kb = ru.ru_maxrss;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: parse-bench JEFIXTURE OUTDIR [--mb N] [--no-jeprof] [--smoke]\n");
        return 2;
    }
    const char *fixture = argv[1], *dir = argv[2];
    size_t mb = 64, min_stacks = 200000;
    int reps = 5;
    bool jeprof = true;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc)
            mb = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--no-jeprof") == 0)
            jeprof = false;
        else if (strcmp(argv[i], "--smoke") == 0) {
            mb = 1;
            min_stacks = 2000;
            reps = 2;
        }
    }
    mkdir(dir, 0755);
    char *seed = hp_xasprintf("%s/seed.heap", dir), *big = hp_xasprintf("%s/big.heap", dir);
    char *cmd = hp_xasprintf("MALLOC_CONF=prof:true,lg_prof_sample:0 %s --threads 6 %s", fixture,
                             seed);
    if (system(cmd) != 0) {
        fprintf(stderr, "fixture failed: %s\n", cmd);
        return 1;
    }
    size_t stacks;
    size_t size = build_big(seed, big, mb, min_stacks, &stacks);
    printf("input: %s, %.1f MB, %zu stacks\n", big, (double)size / 1e6, stacks);

    char *data;
    size_t len;
    if (hp_file_read(big, 0, &data, &len, NULL) < 0)
        return 1;
    double best = 1e9, best_cpu = 1e9;
    double total = 0;
    size_t nlocs = 0;
    for (int rep = 0; rep < reps; rep++) {
        struct profile *p = NULL;
        struct hp_buf err = HP_BUF_INIT(0);
        double t0 = now_s(), c0 = cpu_s();
        int r = ingest_parse(data, len, NULL, &p, &err);
        double dt = now_s() - t0, dc = cpu_s() - c0;
        if (dc < best_cpu)
            best_cpu = dc;
        if (r < 0) {
            fprintf(stderr, "parse failed: %s\n", err.data);
            return 1;
        }
        double t[PV_COUNT];
        profile_totals(p, t);
        total = t[PV_INUSE_SPACE];
        nlocs = p->nlocs;
        profile_free(p);
        hp_buf_release(&err);
        if (dt < best)
            best = dt;
    }
    printf("heapfleet parse: %.3f s wall / %.3f s CPU, best of %d: %.0f MB/s wall, %.0f MB/s CPU "
           "(one core); %zu distinct addresses, total inuse %.0f B\n",
           best, best_cpu, reps, (double)len / 1e6 / best, (double)len / 1e6 / best_cpu, nlocs,
           total);
    double jeprof_mbs = 0;
    free(data);
    if (jeprof) {
        long rss;
        char *jc = hp_xasprintf("jeprof --text --show_bytes %s %s > %s/jeprof.txt 2>/dev/null",
                                fixture, big, dir);
        double jt = time_cmd(jc, &rss);
        if (jt < 0) {
            printf("jeprof: failed or not installed\n");
        } else {
            printf("jeprof --text on the same file: %.1f s, peak RSS %ld MB\n", jt, rss / 1024);
            printf("ratio: heapfleet parse is %.0fx faster than jeprof end to end\n", jt / best);
            jeprof_mbs = (double)len / 1e6 / jt;
        }
        free(jc);
    }
    /* Peer figure: jeprof's end-to-end MB/s (0: not run). */
    printf("RESULT\theap_v2 parse, one core (CPU)\t%.0f\tMB/s\t>= 400 MB/s\tjeprof --text\t%.1f\n",
           (double)len / 1e6 / best_cpu, jeprof_mbs);
    free(seed);
    free(big);
    free(cmd);
    return 0;
}
