/* Fuzz target: the readers for what nodes say about their memory. The first
 * byte picks the reader (Prometheus /metrics, Doris /mem_tracker HTML, brpc
 * /vars, agent /proc JSON, Doris /jeheap/dump reply); the rest is the page.
 * Every failure must come with a message, and the figure count stays capped. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/poll/poll.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    struct poll_figures f = {0};
    struct hp_buf err = HP_BUF_INIT(0);
    int r = 0;
    switch (data[0] % 5) {
    case 0:
        r = poll_metrics_parse(text, len, &f, &err);
        break;
    case 1:
        r = poll_tracker_parse(text, len, &f, &err);
        break;
    case 2:
        r = poll_vars_parse(text, len, &f, &err);
        break;
    case 3:
        r = poll_proc_parse(text, len, &f, &err);
        break;
    default: {
        char *path = NULL;
        if (poll_doris_dump_path(text, len, &path) == 1 && (!path || path[0] != '/'))
            abort();
        free(path);
        break;
    }
    }
    if (r < 0 && (!err.data || !err.len))
        abort();
    if (f.n > POLL_FIGURES_MAX)
        abort();
    for (size_t i = 0; i < f.n; i++)
        if (!f.v[i].name || !f.v[i].name[0])
            abort();
    struct poll_memory m;
    poll_memory_pick(&f, &m);
    poll_figures_release(&f);
    hp_buf_release(&err);
    return 0;
}
