/* The collector's own health for GET /metrics: rounds, polls of each node
 * by outcome, a poll-time histogram. The daemon notes every result it hands
 * to its sink (worker threads); the web server's workers read it. One mutex
 * guards everything. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon.h"
#include "collector/poll/poll.h"

static const double fetch_buckets[] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
#define NBUCKETS (sizeof(fetch_buckets) / sizeof(fetch_buckets[0]))

struct node_health {
    char *name;
    uint64_t ok, failed;
};

struct collector_health {
    pthread_mutex_t mu;
    uint64_t rounds;
    struct node_health *nodes;
    size_t nnodes, cap;
    uint64_t bucket[NBUCKETS + 1]; /* last: +Inf */
    double sum_s;
    uint64_t count;
};

struct collector_health *collector_health_new(void)
{
    struct collector_health *h = hp_xcalloc(1, sizeof(*h));
    pthread_mutex_init(&h->mu, NULL);
    return h;
}

void collector_health_free(struct collector_health *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->nnodes; i++)
        free(h->nodes[i].name);
    free(h->nodes);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void collector_health_note(struct collector_health *h, const struct collector_result *r)
{
    pthread_mutex_lock(&h->mu);
    if (r->round > h->rounds)
        h->rounds = r->round;
    struct node_health *nh = NULL;
    for (size_t i = 0; i < h->nnodes && !nh; i++)
        if (strcmp(h->nodes[i].name, r->node->name) == 0)
            nh = &h->nodes[i];
    if (!nh) {
        h->nodes = hp_xgrow(h->nodes, &h->cap, h->nnodes + 1, sizeof(*h->nodes));
        nh = &h->nodes[h->nnodes++];
        nh->name = hp_xstrdup(r->node->name);
        nh->ok = nh->failed = 0;
    }
    if (r->status == 0)
        nh->ok++;
    else
        nh->failed++;
    double secs = (double)(r->finished_ms - r->started_ms) / 1000.0;
    size_t b = 0;
    while (b < NBUCKETS && secs > fetch_buckets[b])
        b++;
    h->bucket[b]++;
    h->sum_s += secs;
    h->count++;
    pthread_mutex_unlock(&h->mu);
}

void collector_health_metrics(struct collector_health *h, struct hp_buf *out)
{
    pthread_mutex_lock(&h->mu);
    hp_buf_printf(out,
                  "# HELP heapfleet_collector_rounds_total Polling rounds started.\n"
                  "# TYPE heapfleet_collector_rounds_total counter\n"
                  "heapfleet_collector_rounds_total %llu\n",
                  (unsigned long long)h->rounds);
    hp_buf_puts(out, "# HELP heapfleet_collector_polls_total Polls of each node by outcome.\n"
                     "# TYPE heapfleet_collector_polls_total counter\n");
    for (size_t i = 0; i < h->nnodes; i++) {
        struct hp_buf name = HP_BUF_INIT(0);
        hp_buf_prom_label(&name, h->nodes[i].name);
        hp_buf_printf(out,
                      "heapfleet_collector_polls_total{node=%s,result=\"ok\"} %llu\n"
                      "heapfleet_collector_polls_total{node=%s,result=\"failed\"} %llu\n",
                      name.data, (unsigned long long)h->nodes[i].ok, name.data,
                      (unsigned long long)h->nodes[i].failed);
        hp_buf_release(&name);
    }
    hp_buf_puts(out, "# HELP heapfleet_collector_poll_seconds Time to poll one node (dump and "
                     "figures).\n"
                     "# TYPE heapfleet_collector_poll_seconds histogram\n");
    uint64_t cum = 0;
    for (size_t b = 0; b < NBUCKETS; b++) {
        cum += h->bucket[b];
        hp_buf_printf(out, "heapfleet_collector_poll_seconds_bucket{le=\"%g\"} %llu\n",
                      fetch_buckets[b], (unsigned long long)cum);
    }
    cum += h->bucket[NBUCKETS];
    hp_buf_printf(out,
                  "heapfleet_collector_poll_seconds_bucket{le=\"+Inf\"} %llu\n"
                  "heapfleet_collector_poll_seconds_sum %.3f\n"
                  "heapfleet_collector_poll_seconds_count %llu\n",
                  (unsigned long long)cum, h->sum_s, (unsigned long long)h->count);
    pthread_mutex_unlock(&h->mu);
}
