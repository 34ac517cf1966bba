/* Fuzz target: the node list parser (be.list lines). Every rejected line
 * must be described ("SOURCE:LINE: ..."), and a parsed list must survive a
 * copy, a comparison and being freed. Password files named by the input are
 * read, so the harness runs with a cwd where that is harmless. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/poll/poll.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct poll_nodelist *l = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    size_t bad = 0;
    unsigned flags = size && (data[0] & 1) ? POLL_NODELIST_STRICT : 0;
    int r = poll_nodelist_parse((const char *)data, size, "be.list", flags, &l, &bad, &err);
    if ((r < 0 || bad) && (!err.data || strncmp(err.data, "be.list:", 8) != 0))
        abort(); /* every refusal names the file and line */
    if (l) {
        for (size_t i = 0; i < l->n; i++) {
            struct poll_node *c = poll_node_dup(&l->nodes[i]);
            if (!poll_node_equal(c, &l->nodes[i]) || !c->name || !c->addr)
                abort();
            poll_node_free(c);
        }
        poll_nodelist_free(l);
    }
    hp_buf_release(&err);
    return 0;
}
