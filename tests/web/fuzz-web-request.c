/* libFuzzer target for the web layer's own parsing: request paths, query
 * strings, selectors and times (web_api_prepare and friends). h2o parses the
 * HTTP itself; everything after that is ours and must answer any bytes with
 * a response status, never a crash or unbounded memory.
 *
 * Input: "PATH?QUERY" (the first '?' splits; no '?' means no query).
 * Built with -Dfuzzing=true (CC=clang) it is a libFuzzer binary; otherwise a
 * main() replays the seed corpus given on the command line as a plain test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web/folder/folder.h"
#include "web/web-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    const char *q = memchr(buf, '?', size);
    size_t plen = q ? (size_t)(q - buf) : size;
    struct web_request r;
    web_request_init(&r, &web_source_dir_ops, NULL, 1 << 20);
    int rc = web_api_prepare(&r, buf, plen, q ? q + 1 : NULL, q ? size - plen - 1 : 0);
    if (rc == 0 && r.status != 400 && r.status != 404 && r.status != 405 && r.status != 501)
        abort(); /* an immediate answer is always one of these (405: a GET of a
                  * POST-only route, as /api/v1/nodes/NAME/snapshot) */
    if (rc == 1 && (!r.route || r.status != 0))
        abort();
    web_request_release(&r);

    /* Selectors and times on their own (NUL-terminated at the first NUL). */
    struct hp_arena a;
    hp_arena_init(&a);
    struct web_selector sel;
    struct hp_buf err = HP_BUF_INIT(0);
    (void)web_selector_parse(buf, 1795329315626, &a, &sel, &err);
    int64_t ms;
    (void)web_time_parse(buf, 1795329315626, &ms);
    struct hp_buf js = HP_BUF_INIT(0);
    query_json_str(&js, buf);
    hp_buf_release(&js);
    hp_buf_release(&err);
    hp_arena_release(&a);
    free(buf);
    return 0;
}

#ifndef HF_FUZZING
int main(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        char *data = NULL;
        size_t len = 0;
        if (hp_file_read(argv[i], 1 << 20, &data, &len, NULL) < 0) {
            fprintf(stderr, "cannot read %s\n", argv[i]);
            return 1;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)data, len);
        free(data);
        n++;
    }
    printf("replayed %d inputs\n", n);
    return n > 0 ? 0 : 1;
}
#endif
