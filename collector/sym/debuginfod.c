/* debuginfod client (the only file of the symbolizer that includes curl):
 * GET <server>/buildid/<hex>/debuginfo|executable, as elfutils' debuginfod
 * serves them, into an on-disk cache laid out like elfutils' client cache
 * (<cache>/<build-id>/<kind>).
 *
 * The symbolizer runs on a worker thread, so a blocking easy handle is the
 * right tool here. Every transfer has a connect timeout, a total timeout, a
 * low-speed abort and a size cap; a download is written to a temporary file
 * and only renamed into the cache once it parsed as ELF and carried the
 * requested build-id, so a garbage or truncated answer never poisons the
 * cache. */
#include "collector/sym/sym-internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct sink {
    FILE *f;
    uint64_t n, max;
    bool too_big;
};

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct sink *s = ud;
    size_t len = size * nmemb;
    if (s->n + len > s->max) {
        s->too_big = true;
        return 0;
    }
    s->n += len;
    return fwrite(ptr, 1, len, s->f);
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

static int mkdir_p(const char *path)
{
    char *tmp = hp_xstrdup(path);
    int r = 0;
    for (char *p = tmp + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
                r = HP_ERR(errno);
                break;
            }
            *p = c;
            if (c == '\0')
                break;
        }
    }
    free(tmp);
    return r;
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

static int fetch_one(const struct sym_dbgd_options *o, const char *server, const char *build_id,
                     const char *kind, const char *dest, struct hp_buf *err)
{
    size_t sl = strlen(server);
    while (sl > 0 && server[sl - 1] == '/')
        sl--;
    char *url = hp_xasprintf("%.*s/buildid/%s/%s", (int)sl, server, build_id, kind);
    char *tmp = hp_xasprintf("%s.tmp.%ld", dest, (long)getpid());
    int r = 0;
    CURL *c = NULL;
    struct sink s = { .max = o->max_bytes ? o->max_bytes : (UINT64_C(4) << 30) };
    s.f = fopen(tmp, "wbe");
    if (!s.f) {
        hp_err_printf(err, "%s: cannot write %s: %s", url, tmp, strerror(errno));
        r = HP_ERR(errno);
        goto out;
    }
    c = curl_easy_init();
    if (!c) {
        r = HP_EHTTP;
        goto out;
    }
    long timeout = o->timeout_ms > 0 ? o->timeout_ms : 10000;
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, HP_MIN(timeout, 5000L));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, HP_MAX(1L, timeout / 1000));
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)s.max);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "heapfleet-symbolizer/0.1");
    CURLcode cr = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (fclose(s.f) != 0 && cr == CURLE_OK)
        cr = CURLE_WRITE_ERROR;
    s.f = NULL;
    if (s.too_big || cr == CURLE_FILESIZE_EXCEEDED) {
        hp_err_printf(err, "%s: larger than the %llu byte limit", url,
                      (unsigned long long)s.max);
        r = HP_ETOOBIG;
        goto out;
    }
    if (cr != CURLE_OK) {
        hp_err_printf(err, "%s: %s", url, ebuf[0] ? ebuf : curl_easy_strerror(cr));
        r = HP_EHTTP;
        goto out;
    }
    if (status == 404) {
        r = HP_ENOTFOUND;
        goto out;
    }
    if (status != 200) {
        hp_err_printf(err, "%s: HTTP status %ld", url, status);
        r = HP_EHTTP;
        goto out;
    }
    r = verify(tmp, build_id, err, url);
    if (r == 0 && rename(tmp, dest) != 0) {
        hp_err_printf(err, "%s: cannot place in cache: %s", dest, strerror(errno));
        r = HP_ERR(errno);
    }
out:
    if (s.f)
        fclose(s.f);
    if (r != 0)
        unlink(tmp);
    if (c)
        curl_easy_cleanup(c);
    free(tmp);
    free(url);
    return r;
}

int sym_debuginfod_fetch(const struct sym_dbgd_options *o, const char *build_id,
                         const char *kind, char **ret_path, struct hp_buf *err)
{
    if (!o->urls || !*o->urls || !o->cache_dir)
        return HP_ENOTFOUND;
    if (!valid_build_id(build_id))
        return HP_EUSAGE;
    char *dir = hp_xasprintf("%s/%s", o->cache_dir, build_id);
    char *dest = hp_xasprintf("%s/%s", dir, kind);
    int r = HP_ENOTFOUND;
    struct stat st;
    if (stat(dest, &st) == 0 && S_ISREG(st.st_mode) && verify(dest, build_id, NULL, dest) == 0) {
        r = 0;
        goto out;
    }
    r = mkdir_p(dir);
    if (r < 0) {
        hp_err_printf(err, "%s: cannot create cache directory: %s", dir, hp_strerror(r));
        goto out;
    }
    curl_init_once();
    r = HP_ENOTFOUND;
    /* Servers are tried in order; the first that has it wins. */
    const char *p = o->urls;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        const char *q = p;
        while (*q && *q != ' ' && *q != '\t' && *q != '\n')
            q++;
        if (q > p) {
            uint64_t h = hp_hash_bytes(p, (size_t)(q - p), 0);
            struct sym_dbgd_backoff *bo = o->backoff;
            size_t slot = bo ? h % HP_ARRAY_SIZE(bo->url_hash) : 0;
            if (bo && bo->url_hash[slot] == h && hp_now_ns() < bo->until_ns[slot]) {
                p = q;
                continue;
            }
            char *server = hp_xstrndup(p, (size_t)(q - p));
            int fr = fetch_one(o, server, build_id, kind, dest, err);
            free(server);
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
        p = q;
    }
out:
    if (r == 0)
        *ret_path = hp_xstrdup(dest);
    free(dest);
    free(dir);
    return r;
}
