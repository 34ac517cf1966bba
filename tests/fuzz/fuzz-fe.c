/* Fuzz target: the FE's backends table (/api/show_proc JSON). A refusal
 * says why; every backend read has a numeric id, a host and a port, and
 * turns into a node that survives a copy and being freed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/poll/poll.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct poll_backend *b = NULL;
    size_t n = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    bool cn = size && (data[0] & 1);
    int r = poll_fe_backends_parse((const char *)data, size, cn, &b, &n, &err);
    if (r < 0 && (!err.data || !err.len))
        abort(); /* every refusal says why */
    struct poll_node fe = { .kind = POLL_KIND_STARROCKS_FE, .name = "fe", .addr = "h:1",
                            .agent_port = 7071 };
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (!b[i].id || !b[i].host || b[i].http_port == 0)
            abort();
        struct poll_node *node = poll_fe_backend_node(&fe, &b[i]);
        struct poll_node *c = poll_node_dup(node);
        if (!poll_node_equal(c, node))
            abort();
        poll_node_free(c);
        poll_node_free(node);
    }
    if (r == 0)
        poll_backends_free(b, n);
    hp_buf_release(&err);
    return 0;
}
