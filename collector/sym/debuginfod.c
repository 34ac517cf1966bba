/* debuginfod client (the only file of the symbolizer that includes curl):
 * GET <server>/buildid/<hex>/debuginfo|executable, as elfutils' debuginfod
 * and the heapfleet agent serve them, into an on-disk cache laid out like
 * elfutils' client cache (<cache>/<build-id>/<kind>), with a bearer token,
 * extra headers from a file and a CA file per server; and the agent's
 * /identity?path= lookup that tells which build a node has at a path.
 *
 * The symbolizer runs on a worker thread, so a blocking easy handle is the
 * right tool here. Every transfer has a connect timeout, a low-speed abort
 * and a size cap; a download is written to <cache>/<build-id>/<kind>.part
 * and only renamed into the cache once it parsed as ELF and carried the
 * requested build-id, so a garbage or truncated answer never poisons the
 * cache. An interrupted download resumes from the part file with a Range
 * request (at once, and in the next fetch or process), and starts over from
 * zero when the server ignores Range or the resumed file fails its check
 * (fetch_one). One download per build-id and kind at a time in the process (a
 * second node of the same build waits for the first and finds the file);
 * the cache as a whole stays under cache_max_bytes, the least recently
 * used files (by mtime, set again on every hit) removed first. */
#include "collector/sym/sym-internal.h"

#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where one transfer's body goes: the part file, from `n` on. */
struct sink {
    int fd;
    uint64_t n, max;
    bool too_big, write_failed;
    /* Content-Range of a 206: its first byte and the file's size (-1: none) */
    int64_t range_first, range_total;
};

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct sink *s = ud;
    size_t len = size * nmemb;
    if (s->n + len > s->max) {
        s->too_big = true;
        return 0;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = pwrite(s->fd, ptr + done, len - done, (off_t)(s->n + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s->write_failed = true;
            return 0;
        }
        done += (size_t)w;
    }
    s->n += len;
    return len;
}

/* Headers of a transfer: a new status line starts over (redirects), and
 * "Content-Range: bytes FIRST-LAST/TOTAL" is kept. */
static size_t header_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct sink *s = ud;
    size_t len = size * nmemb;
    if (len >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
        s->range_first = s->range_total = -1;
    } else if (len > 14 && strncasecmp(ptr, "content-range:", 14) == 0) {
        unsigned long long first, last, total;
        char line[160];
        snprintf(line, sizeof(line), "%.*s", (int)HP_MIN(len, sizeof(line) - 1), ptr);
        if (sscanf(line + 14, " bytes %llu-%llu/%llu", &first, &last, &total) == 3 &&
            first <= last && last < total && total <= INT64_MAX) {
            s->range_first = (int64_t)first;
            s->range_total = (int64_t)total;
        }
    }
    return len;
}

static void curl_global_cb(void)
{
    (void)curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* curl_global_init is not thread-safe on older curls; run it once. */
static void curl_init_once(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    (void)pthread_once(&once, curl_global_cb);
}

static bool valid_build_id(const char *b)
{
    size_t n = strlen(b);
    if (n < 2 || n > 2 * SYM_BUILD_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f')))
            return false;
    return true;
}

static int verify(const char *path, const char *build_id, struct hp_buf *err, const char *src)
{
    struct sym_elf_identity id;
    struct hp_buf why = HP_BUF_INIT(0);
    int r = sym_elf_identity_read(path, &id, &why);
    if (r < 0) {
        hp_err_printf(err, "%s: answer is not a usable ELF file (%s)", src,
                      why.len ? why.data : hp_strerror(r));
        hp_buf_release(&why);
        return HP_EMISMATCH;
    }
    hp_buf_release(&why);
    if (strcmp(id.build_id, build_id) != 0) {
        hp_err_printf(err, "%s: answer has build-id %s, expected %s", src,
                      id.build_id[0] ? id.build_id : "(none)", build_id);
        return HP_EMISMATCH;
    }
    return 0;
}

/* Headers for one server: its bearer token and the "Name: value" lines of
 * its header file (at most 64 lines of 4 KiB; other lines are skipped). */
static struct curl_slist *auth_headers(const struct sym_server *sv, struct hp_buf *err)
{
    struct curl_slist *h = NULL;
    if (sv->bearer && *sv->bearer) {
        char *line = hp_xasprintf("Authorization: Bearer %s", sv->bearer);
        h = curl_slist_append(h, line);
        free(line);
    }
    if (sv->header_file && *sv->header_file) {
        FILE *f = fopen(sv->header_file, "re");
        if (!f) {
            hp_err_printf(err, "%s: header file %s: %s; ", sv->url, sv->header_file,
                          strerror(errno));
            return h;
        }
        char line[4096];
        for (int n = 0; n < 64 && fgets(line, sizeof(line), f); n++) {
            line[strcspn(line, "\r\n")] = '\0';
            const char *colon = strchr(line, ':');
            if (!colon || colon == line || line[0] == '#')
                continue;
            h = curl_slist_append(h, line);
        }
        fclose(f);
    }
    return h;
}

static void set_common(CURL *c, const struct sym_server *sv, long timeout, char *ebuf)
{
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    /* A token is for the server it was configured for, never a redirect's. */
    curl_easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, HP_MIN(timeout, 5000L));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, HP_MAX(1L, timeout / 1000));
    curl_easy_setopt(c, CURLOPT_USERAGENT, "heapfleet-symbolizer/0.1");
    if (sv->ca_file && *sv->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, sv->ca_file);
    if (sv->user) {
        curl_easy_setopt(c, CURLOPT_USERNAME, sv->user);
        curl_easy_setopt(c, CURLOPT_PASSWORD, sv->password ? sv->password : "");
    }
}

/* How one transfer ended. */
enum xfer {
    XFER_DONE,     /* 200 or 206: the part file holds the whole answer */
    XFER_CUT,      /* the body stopped early (connection cut, stalled) */
    XFER_RESTART,  /* the part file cannot be resumed: start from zero */
    XFER_FAILED,   /* r and err say why; the part file is kept */
    XFER_DROP,     /* r and err say why; the part file is useless */
};

/* One GET of url into fd from byte `have` on (a Range request when
 * have > 0). *ret_n: the part file's length after it. */
static enum xfer transfer(const struct sym_dbgd_options *o, const struct sym_server *sv,
                          const char *url, int fd, uint64_t have, uint64_t *ret_n, int *ret_r,
                          struct hp_buf *err)
{
    struct sink s = { .fd = fd, .n = have, .max = o->max_bytes ? o->max_bytes : (UINT64_C(4) << 30),
                      .range_first = -1, .range_total = -1 };
    if (have >= s.max) { /* a part file past the cap: not this file's */
        *ret_n = have;
        *ret_r = HP_EHTTP;
        return XFER_RESTART;
    }
    CURL *c = curl_easy_init();
    if (!c) {
        *ret_r = HP_EHTTP;
        *ret_n = have;
        return XFER_FAILED;
    }
    long timeout = o->timeout_ms > 0 ? o->timeout_ms : 10000;
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
    set_common(c, sv, timeout, ebuf);
    /* A 2 GB binary streams to disk at whatever pace the link allows: no
     * total timeout; the connect timeout and the low-speed limit (under
     * 1 KiB/s for timeout_ms) catch a server that is down or stalls. */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 0L);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)(s.max - have));
    if (have)
        curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)have);
    struct curl_slist *hdrs = auth_headers(sv, err);
    if (hdrs)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    CURLcode cr = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    *ret_n = s.n;
    *ret_r = HP_EHTTP;
    if (s.too_big || cr == CURLE_FILESIZE_EXCEEDED) {
        hp_err_printf(err, "%s: larger than the %llu byte limit", url, (unsigned long long)s.max);
        *ret_r = HP_ETOOBIG;
        return XFER_DROP;
    }
    if (s.write_failed) {
        hp_err_printf(err, "%s: writing the download at byte %llu: %s", url,
                      (unsigned long long)s.n, strerror(errno));
        *ret_r = HP_ERR(EIO);
        return XFER_FAILED;
    }
    /* A server that ignores Range answers 200 with the whole file, which
     * curl refuses to append (CURLE_RANGE_ERROR); 416: the part file is
     * longer than the file. Both: from zero. */
    if (have && (cr == CURLE_RANGE_ERROR || status == 416))
        return XFER_RESTART;
    if (have && status == 206 && s.range_first >= 0 && (uint64_t)s.range_first != have)
        return XFER_RESTART;
    if (cr != CURLE_OK) {
        hp_err_printf(err, "%s: %s%s", url, cr == CURLE_OPERATION_TIMEDOUT ? "timed out: " : "",
                      ebuf[0] ? ebuf : curl_easy_strerror(cr));
        return (status == 200 || status == 206) && s.n > have ? XFER_CUT : XFER_FAILED;
    }
    if (status == 404) {
        *ret_r = HP_ENOTFOUND;
        return XFER_DROP;
    }
    if (status == 401 || status == 403) {
        hp_err_printf(err, "%s: HTTP status %ld (token refused)", url, status);
        return XFER_DROP;
    }
    if (status != 200 && status != 206) {
        hp_err_printf(err, "%s: HTTP status %ld", url, status);
        return XFER_FAILED;
    }
    if (status == 206 && s.range_total >= 0 && s.n != (uint64_t)s.range_total) {
        hp_err_printf(err, "%s: %llu of %lld bytes", url, (unsigned long long)s.n,
                      (long long)s.range_total);
        return XFER_CUT;
    }
    *ret_r = 0;
    return XFER_DONE;
}

/* Transfers that end early but brought bytes are resumed at once, up to
 * this many times per fetch; the part file stays for the next fetch. */
#define FETCH_RESUMES 4

/* Download url into dest through <dest>.part: an interrupted transfer (a
 * cut connection, a stall, a restarted process) resumes from the part
 * file's length with a Range request; the server ignoring Range, a 416, or
 * a whole file that fails the build-id check after a resume start over
 * from zero, once. The part file is locked (flock) while it is written:
 * another process fetching the same file at the same moment uses a file of
 * its own and starts from zero. Nothing reaches dest unless it parsed as
 * ELF with the requested build-id. */
static int fetch_one(const struct sym_dbgd_options *o, const struct sym_server *sv,
                     const char *build_id, const char *kind, const char *dest,
                     struct hp_buf *err)
{
    const char *server = sv->url;
    size_t sl = strlen(server);
    while (sl > 0 && server[sl - 1] == '/')
        sl--;
    char *url = hp_xasprintf("%.*s/buildid/%s/%s", (int)sl, server, build_id, kind);
    char *part = hp_xasprintf("%s.part", dest);
    int r = 0;
    int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        free(part);
        part = hp_xasprintf("%s.tmp.%ld", dest, (long)getpid());
        fd = open(part, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
        hp_err_printf(err, "%s: cannot write %s: %s", url, part, strerror(errno));
        r = HP_ERR(errno);
        goto out;
    }
    struct stat st;
    uint64_t have = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    bool restarted = false, drop = false;
    struct hp_buf terr = HP_BUF_INIT(0); /* the last transfer's reason */
    for (int resumes = 0;;) {
        uint64_t n;
        hp_buf_reset(&terr);
        enum xfer x = transfer(o, sv, url, fd, have, &n, &r, &terr);
        if (x == XFER_DONE) {
            if (ftruncate(fd, (off_t)n) != 0) {
                r = HP_ERR(errno);
                break;
            }
            /* Resumed onto a part file that was not this file's beginning:
             * the whole fails its check; once more from zero. */
            struct hp_buf why = HP_BUF_INIT(0);
            r = verify(part, build_id, &why, url);
            if (r < 0 && have && !restarted) {
                hp_log_info("sym", "url=%s bytes=%llu msg=\"a resumed download failed its check; "
                            "starting again from zero\"", url, (unsigned long long)have);
                hp_buf_release(&why);
                restarted = true;
                have = 0;
                continue;
            }
            if (r < 0)
                hp_buf_puts(&terr, why.data ? why.data : "");
            hp_buf_release(&why);
            drop = r < 0;
            break;
        }
        if (x == XFER_RESTART && !restarted) {
            restarted = true;
            have = 0;
            continue;
        }
        if (x == XFER_CUT && n > have && resumes++ < FETCH_RESUMES) {
            hp_log_info("sym", "url=%s bytes=%llu msg=\"download interrupted; resuming\"", url,
                        (unsigned long long)n);
            have = n;
            continue;
        }
        if (x == XFER_RESTART) {
            hp_err_printf(&terr, "%s: the server cannot resume this download", url);
            r = HP_EHTTP;
        }
        drop = x == XFER_DROP || x == XFER_RESTART;
        if (x == XFER_CUT && ftruncate(fd, (off_t)n) != 0)
            drop = true;
        break;
    }
    if (r == 0 && rename(part, dest) != 0) {
        hp_err_printf(err, "%s: cannot place in cache: %s", dest, strerror(errno));
        r = HP_ERR(errno);
        drop = true;
    }
    /* A private temporary file is never resumed. */
    if (r != 0 && (drop || strstr(part, ".tmp.")))
        unlink(part);
    close(fd);
    if (r != 0 && terr.len)
        hp_buf_puts(err, terr.data);
    hp_buf_release(&terr);
out:
    free(part);
    free(url);
    return r;
}

/* Downloads in flight in this process, by "<build-id>/<kind>": a second
 * request for the same file waits for the first instead of fetching again
 * (and writing the same temporary file). */
static pthread_mutex_t inflight_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t inflight_cond = PTHREAD_COND_INITIALIZER;
static char *inflight[64];

static bool inflight_has(const char *key)
{
    for (size_t i = 0; i < HP_ARRAY_SIZE(inflight); i++)
        if (inflight[i] && strcmp(inflight[i], key) == 0)
            return true;
    return false;
}

/* Wait until no download of key is in flight, then claim it (or, when all
 * slots are taken, go on unclaimed: bounded, never a deadlock). Returns the
 * slot claimed or -1. */
static int inflight_claim(const char *key)
{
    pthread_mutex_lock(&inflight_mu);
    while (inflight_has(key))
        pthread_cond_wait(&inflight_cond, &inflight_mu);
    int slot = -1;
    for (size_t i = 0; i < HP_ARRAY_SIZE(inflight) && slot < 0; i++)
        if (!inflight[i]) {
            inflight[i] = hp_xstrdup(key);
            slot = (int)i;
        }
    pthread_mutex_unlock(&inflight_mu);
    return slot;
}

static void inflight_release(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&inflight_mu);
    free(inflight[slot]);
    inflight[slot] = NULL;
    pthread_cond_broadcast(&inflight_cond);
    pthread_mutex_unlock(&inflight_mu);
}

struct cached_file {
    char *path;
    uint64_t size;
    int64_t mtime_ns;
};

static int cached_older_first(const void *a, const void *b)
{
    const struct cached_file *x = a, *y = b;
    return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/* A part file another fetch is writing (it holds the flock): not ours to
 * remove. */
static bool part_in_use(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool busy = flock(fd, LOCK_EX | LOCK_NB) != 0;
    close(fd);
    return busy;
}

/* Keep the cache under max bytes: remove the least recently used files of
 * <cache>/<build-id>/<kind>, and part files of interrupted downloads that no
 * fetch is writing (never `keep`, the one just placed), until the rest
 * fits. Other files and folders are left alone. */
static void cache_trim(const char *cache_dir, uint64_t max, const char *keep)
{
    DIR *top = opendir(cache_dir);
    if (!top)
        return;
    struct cached_file *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(top)) != NULL) {
        if (!valid_build_id(de->d_name))
            continue;
        static const char *const kinds[] = { "debuginfo", "executable", "debuginfo.part",
                                             "executable.part" };
        for (size_t k = 0; k < HP_ARRAY_SIZE(kinds); k++) {
            char *path = hp_xasprintf("%s/%s/%s", cache_dir, de->d_name, kinds[k]);
            struct stat st;
            if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
                (strstr(kinds[k], ".part") && part_in_use(path))) {
                free(path);
                continue;
            }
            v = hp_xgrow(v, &cap, n + 1, sizeof(*v));
            v[n++] = (struct cached_file){ path, (uint64_t)st.st_size,
                                           (int64_t)st.st_mtim.tv_sec * 1000000000 +
                                               st.st_mtim.tv_nsec };
            total += (uint64_t)st.st_size;
        }
    }
    closedir(top);
    if (n > 1)
        hp_qsort(v, n, sizeof(*v), cached_older_first);
    for (size_t i = 0; i < n && total > max; i++) {
        if (strcmp(v[i].path, keep) == 0)
            continue;
        if (unlink(v[i].path) == 0) {
            total -= v[i].size;
            hp_log_info("sym", "path=%s bytes=%llu msg=\"removed from the download cache "
                               "(least recently used; the cache is over its limit)\"",
                        v[i].path, (unsigned long long)v[i].size);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].path);
    free(v);
}

int sym_debuginfod_fetch(const struct sym_dbgd_options *o, const char *build_id,
                         const char *kind, char **ret_path, struct hp_buf *err)
{
    if (o->nservers == 0 || !o->cache_dir)
        return HP_ENOTFOUND;
    if (!valid_build_id(build_id))
        return HP_EUSAGE;
    char *dir = hp_xasprintf("%s/%s", o->cache_dir, build_id);
    char *dest = hp_xasprintf("%s/%s", dir, kind);
    int r = HP_ENOTFOUND;
    bool fetched = false;
    struct stat st;
    char *key = hp_xasprintf("%s/%s", build_id, kind);
    int claim = inflight_claim(key);
    free(key);
    /* One download per build-id: whichever node or server brought it, the
     * next node with the same build finds it here. A hit counts as a use
     * for the cache's least-recently-used order. */
    if (stat(dest, &st) == 0 && S_ISREG(st.st_mode) && verify(dest, build_id, NULL, dest) == 0) {
        (void)utimensat(AT_FDCWD, dest, NULL, 0);
        r = 0;
        goto out;
    }
    r = hp_mkdir_p(dir);
    if (r < 0) {
        hp_err_printf(err, "%s: cannot create cache directory: %s", dir, hp_strerror(r));
        goto out;
    }
    curl_init_once();
    r = HP_ENOTFOUND;
    /* Servers are tried in order; the first that has it wins. */
    for (size_t i = 0; i < o->nservers; i++) {
        const struct sym_server *sv = &o->servers[i];
        if (!sv->url || !*sv->url)
            continue;
        uint64_t h = hp_hash_bytes(sv->url, strlen(sv->url), 0);
        struct sym_dbgd_backoff *bo = o->backoff;
        size_t slot = bo ? h % HP_ARRAY_SIZE(bo->url_hash) : 0;
        if (bo && bo->url_hash[slot] == h && hp_now_ns() < bo->until_ns[slot])
            continue;
        int fr = fetch_one(o, sv, build_id, kind, dest, err);
        fetched = fr == 0;
        if (bo && fr == HP_EHTTP) {
            bo->url_hash[slot] = h;
            bo->until_ns[slot] = hp_now_ns() + UINT64_C(60) * 1000000000;
        }
        if (fr == 0) {
            r = 0;
            break;
        }
        /* Remember the most telling failure: anything beats "not found". */
        if (r == HP_ENOTFOUND)
            r = fr;
    }
out:
    if (r == 0)
        *ret_path = hp_xstrdup(dest);
    if (r == 0 && fetched)
        cache_trim(o->cache_dir, o->cache_max_bytes ? o->cache_max_bytes : (UINT64_C(16) << 30),
                   dest);
    inflight_release(claim);
    free(dest);
    free(dir);
    return r;
}

void sym_dbgd_servers_parse(const char *urls, struct sym_server **servers, size_t *n,
                            size_t *cap)
{
    const char *p = urls ? urls : "";
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        const char *q = p;
        while (*q && *q != ' ' && *q != '\t' && *q != '\n')
            q++;
        if (q > p) {
            *servers = hp_xgrow(*servers, cap, *n + 1, sizeof(**servers));
            (*servers)[(*n)++] = (struct sym_server){ .url = hp_xstrndup(p, (size_t)(q - p)) };
        }
        p = q;
    }
}

struct membuf {
    struct hp_buf *b;
    size_t max;
};

static size_t mem_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct membuf *m = ud;
    size_t len = size * nmemb;
    if (m->b->len + len > m->max)
        return 0;
    hp_buf_append(m->b, ptr, len);
    return len;
}

int sym_agent_identity_parse(const char *body, size_t len, char *ret_build_id)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, 0, &je);
    const char *bid = o ? json_string_value(json_object_get(o, "build_id")) : NULL;
    int r = 0;
    if (!bid || !*bid || !valid_build_id(bid))
        r = bid && !*bid ? HP_ENOTFOUND : HP_EPARSE;
    else
        snprintf(ret_build_id, 2 * SYM_BUILD_ID_MAX + 1, "%s", bid);
    json_decref(o);
    return r;
}

int sym_agent_identity(const struct sym_server *agent, const char *path, long timeout_ms,
                       char *ret_build_id, struct hp_buf *err)
{
    curl_init_once();
    CURL *c = curl_easy_init();
    if (!c)
        return HP_EHTTP;
    char *esc = curl_easy_escape(c, path, 0);
    size_t sl = strlen(agent->url);
    while (sl > 0 && agent->url[sl - 1] == '/')
        sl--;
    char *url = hp_xasprintf("%.*s/identity?path=%s", (int)sl, agent->url, esc ? esc : "");
    curl_free(esc);
    struct hp_buf body = HP_BUF_INIT(0);
    struct membuf mb = { &body, 64 * 1024 };
    char ebuf[CURL_ERROR_SIZE] = "";
    long timeout = timeout_ms > 0 ? timeout_ms : 10000;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &mb);
    set_common(c, agent, timeout, ebuf);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout);
    struct curl_slist *hdrs = auth_headers(agent, err);
    if (hdrs)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    int r = 0;
    CURLcode cr = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (cr != CURLE_OK) {
        hp_err_printf(err, "%s: %s", url, ebuf[0] ? ebuf : curl_easy_strerror(cr));
        r = HP_EHTTP;
        goto out;
    }
    if (status == 404 || status == 403) {
        /* 403: the agent serves only binaries of live processes and its
         * --binaries folders; for the collector that is "not there". */
        hp_err_printf(err, "%s: HTTP status %ld", url, status);
        r = HP_ENOTFOUND;
        goto out;
    }
    if (status != 200) {
        hp_err_printf(err, "%s: HTTP status %ld%s", url, status,
                      status == 401 ? " (token refused)" : "");
        r = HP_EHTTP;
        goto out;
    }
    r = sym_agent_identity_parse(body.data ? body.data : "", body.len, ret_build_id);
    if (r < 0)
        hp_err_printf(err, "%s: answer has no build_id (expected a JSON object with a hex "
                           "\"build_id\")", url);
out:
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    hp_buf_release(&body);
    free(url);
    return r;
}

/* ---- gperftools /pprof/symbol ------------------------------------------------ */

/* Parse "0xADDR name" lines (gperftools' symbol service, as jeprof reads
 * it); lines of another shape are skipped, names are capped at 4 KiB. */
void sym_pprof_symbol_parse(const char *b, size_t n, sym_symbol_cb cb, void *ctx)
{
    size_t i = 0;
    while (i < n) {
        const char *line = b + i;
        const char *nl = memchr(line, '\n', n - i);
        size_t len = nl ? (size_t)(nl - line) : n - i;
        i += len + 1;
        if (len > 0 && line[len - 1] == '\r')
            len--;
        size_t k = 0;
        if (len >= 2 && line[0] == '0' && (line[1] == 'x' || line[1] == 'X'))
            k = 2;
        size_t hs = k;
        while (k < len && k - hs < 17 &&
               ((line[k] >= '0' && line[k] <= '9') || ((line[k] | 0x20) >= 'a' && (line[k] | 0x20) <= 'f')))
            k++;
        uint64_t addr;
        if (k == hs || k >= len || line[k] != ' ' ||
            hp_parse_hex64(line + hs, k - hs, &addr) < 0)
            continue;
        k++;
        size_t nl2 = len - k;
        if (nl2 == 0 || nl2 > 4096)
            continue;
        cb(ctx, addr, line + k, nl2);
    }
}

int sym_pprof_symbol(const struct sym_server *sv, const uint64_t *addrs, size_t n,
                     long timeout_ms, sym_symbol_cb cb, void *ctx, struct hp_buf *err)
{
    curl_init_once();
    CURL *c = curl_easy_init();
    if (!c)
        return HP_EHTTP;
    long timeout = timeout_ms > 0 ? timeout_ms : 10000;
    char ebuf[CURL_ERROR_SIZE] = "";
    struct hp_buf body = HP_BUF_INIT(0), req = HP_BUF_INIT(0);
    struct membuf mb = { &body, 16u << 20 };
    struct curl_slist *hdrs = auth_headers(sv, err);
    int r = 0;
    /* In batches, as jeprof posts them; each answer is parsed at once. */
    for (size_t i = 0; i < n && r == 0;) {
        hp_buf_reset(&req);
        hp_buf_reset(&body);
        size_t end = HP_MIN(n, i + 4096);
        for (size_t k = i; k < end; k++)
            hp_buf_printf(&req, "%s0x%llx", k > i ? "+" : "", (unsigned long long)addrs[k]);
        i = end;
        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, sv->url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_cb);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &mb);
        set_common(c, sv, timeout, ebuf);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.data);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)req.len);
        if (hdrs)
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        CURLcode cr = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (cr != CURLE_OK) {
            hp_err_printf(err, "%s: %s", sv->url, ebuf[0] ? ebuf : curl_easy_strerror(cr));
            r = HP_EHTTP;
        } else if (status != 200) {
            hp_err_printf(err, "%s: HTTP status %ld", sv->url, status);
            r = status == 404 ? HP_ENOTFOUND : HP_EHTTP;
        } else {
            sym_pprof_symbol_parse(body.data ? body.data : "", body.len, cb, ctx);
        }
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    hp_buf_release(&body);
    hp_buf_release(&req);
    return r;
}
