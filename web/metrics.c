/* GET /metrics: Prometheus text exposition (format 0.0.4) of the web
 * server's own health, the process, each node's latest heap total and memory
 * figures, and whatever the source adds (the collector's rounds, failures,
 * fetch latency and store size).
 *
 * Rules kept here: every family has one HELP and one TYPE line before its
 * samples, samples of a family are contiguous, label values escape \, " and
 * newline, histograms have cumulative le buckets ending in +Inf plus _sum and
 * _count. tests/web checks them line by line.
 *
 * Thread context: worker thread. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "web/web-internal.h"

void web_metrics_family(struct hp_buf *b, const char *name, const char *type, const char *help)
{
    hp_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_node(struct hp_buf *b, const char *name, const char *node, double v)
{
    hp_buf_printf(b, "%s{node=", name);
    hp_buf_prom_label(b, node);
    hp_buf_printf(b, "} %.17g\n", v);
}

static double process_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0, rss = 0;
    if (!f)
        return NAN;
    int n = fscanf(f, "%lu %lu", &pages, &rss);
    fclose(f);
    return n == 2 ? (double)rss * (double)sysconf(_SC_PAGESIZE) : NAN;
}

/* One per-node gauge family over all nodes that have the figure. */
struct node_fig {
    const char *name, *help;
    size_t off; /* offset of a double inside web_snapshot_info */
};

#define FIG(n, field, h) { n, h, offsetof(struct web_snapshot_info, field) }
static const struct node_fig figs[] = {
    FIG("heapfleet_node_heap_inuse_bytes", total[PV_INUSE_SPACE],
        "In-use bytes of the node's latest heap profile (un-sampled)."),
    FIG("heapfleet_node_heap_inuse_objects", total[PV_INUSE_OBJECTS],
        "In-use objects of the node's latest heap profile (un-sampled)."),
    FIG("heapfleet_node_rss_bytes", fig.rss, "Resident set size the node reported."),
    FIG("heapfleet_node_jemalloc_allocated_bytes", fig.je_allocated,
        "jemalloc stats.allocated the node reported."),
    FIG("heapfleet_node_jemalloc_active_bytes", fig.je_active,
        "jemalloc stats.active the node reported."),
    FIG("heapfleet_node_jemalloc_resident_bytes", fig.je_resident,
        "jemalloc stats.resident the node reported."),
    FIG("heapfleet_node_jemalloc_metadata_bytes", fig.je_metadata,
        "jemalloc stats.metadata the node reported."),
    FIG("heapfleet_node_jemalloc_retained_bytes", fig.je_retained,
        "jemalloc stats.retained the node reported."),
    FIG("heapfleet_node_tracker_total_bytes", fig.tracker_total,
        "Total of the node's own memory tracker."),
    FIG("heapfleet_node_symbolized_ratio", fig.symbolized_ratio,
        "Share of the latest profile's in-use bytes whose frames are all named (0..1)."),
};

static void node_metrics(struct web_request *r, struct hp_buf *b)
{
    struct web_node_info *nodes = NULL;
    size_t n = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    if (!r->src->list_nodes || r->src->list_nodes(r->src_ctx, &r->arena, &nodes, &n, &err) < 0) {
        web_metrics_family(b, "heapfleet_web_source_errors", "gauge",
               "1 when the data source could not list nodes for this scrape.");
        hp_buf_puts(b, "heapfleet_web_source_errors 1\n");
        hp_buf_release(&err);
        return;
    }
    hp_buf_release(&err);
    web_metrics_family(b, "heapfleet_node_up", "gauge", "1 when the node's last poll succeeded.");
    for (size_t i = 0; i < n; i++) {
        hp_buf_puts(b, "heapfleet_node_up{node=");
        hp_buf_prom_label(b, nodes[i].name);
        hp_buf_puts(b, ",kind=");
        hp_buf_prom_label(b, nodes[i].kind ? nodes[i].kind : "unknown");
        hp_buf_printf(b, "} %d\n", nodes[i].status && strcmp(nodes[i].status, "ok") == 0);
    }
    web_metrics_family(b, "heapfleet_node_snapshots", "gauge", "Snapshots stored for the node.");
    for (size_t i = 0; i < n; i++)
        sample_node(b, "heapfleet_node_snapshots", nodes[i].name, (double)nodes[i].nsnapshots);
    web_metrics_family(b, "heapfleet_node_last_snapshot_timestamp_seconds", "gauge",
           "When the node's latest snapshot was taken (Unix time).");
    for (size_t i = 0; i < n; i++)
        if (nodes[i].has_latest)
            sample_node(b, "heapfleet_node_last_snapshot_timestamp_seconds", nodes[i].name,
                        (double)nodes[i].latest.time_ms / 1000.0);
    for (size_t k = 0; k < HP_ARRAY_SIZE(figs); k++) {
        bool any = false;
        for (size_t i = 0; i < n; i++) {
            if (!nodes[i].has_latest)
                continue;
            double v = *(const double *)((const char *)&nodes[i].latest + figs[k].off);
            if (isnan(v))
                continue;
            if (!any)
                web_metrics_family(b, figs[k].name, "gauge", figs[k].help);
            any = true;
            sample_node(b, figs[k].name, nodes[i].name, v);
        }
    }
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        const struct web_snapshot_info *s = &nodes[i].latest;
        for (size_t t = 0; nodes[i].has_latest && t < s->ntrackers; t++) {
            if (!any)
                web_metrics_family(b, "heapfleet_node_tracker_bytes", "gauge",
                       "One memory tracker figure of the node's latest snapshot.");
            any = true;
            hp_buf_puts(b, "heapfleet_node_tracker_bytes{node=");
            hp_buf_prom_label(b, nodes[i].name);
            hp_buf_puts(b, ",tracker=");
            hp_buf_prom_label(b, s->trackers[t].name);
            hp_buf_printf(b, "} %.17g\n", s->trackers[t].bytes);
        }
    }
    web_verdicts_metrics(r->verdicts, r, nodes, n, b);
}

void web_metrics_run(struct web_request *r, const struct web_stats *st)
{
    struct hp_buf *b = &r->body;
    hp_buf_reset(b);
    int64_t now = hp_wall_ms();
    web_metrics_family(b, "heapfleet_web_uptime_seconds", "gauge", "Seconds since the web server started.");
    hp_buf_printf(b, "heapfleet_web_uptime_seconds %.3f\n",
                  (double)(now - (int64_t)st->started_ms) / 1000.0);
    web_metrics_family(b, "heapfleet_web_requests_total", "counter",
           "HTTP responses of the API and /metrics by status class.");
    for (int c = 1; c <= 5; c++)
        hp_buf_printf(b, "heapfleet_web_requests_total{code=\"%dxx\"} %llu\n", c,
                      (unsigned long long)st->requests[c]);
    web_metrics_family(b, "heapfleet_web_connections_open", "gauge", "Open client connections.");
    hp_buf_printf(b, "heapfleet_web_connections_open %llu\n",
                  (unsigned long long)st->connections_open);
    web_metrics_family(b, "heapfleet_web_connections_total", "counter", "Client connections accepted.");
    hp_buf_printf(b, "heapfleet_web_connections_total %llu\n",
                  (unsigned long long)st->connections_total);
    web_metrics_family(b, "heapfleet_web_connections_evicted_total", "counter",
           "Oldest connections closed to make room at the connection cap.");
    hp_buf_printf(b, "heapfleet_web_connections_evicted_total %llu\n",
                  (unsigned long long)st->connections_evicted);
    web_metrics_family(b, "heapfleet_web_jobs_running", "gauge", "Data requests running on worker threads.");
    hp_buf_printf(b, "heapfleet_web_jobs_running %llu\n", (unsigned long long)st->jobs_running);
    web_metrics_family(b, "heapfleet_web_jobs_rejected_total", "counter",
           "Data requests refused with 503 because too many were in flight.");
    hp_buf_printf(b, "heapfleet_web_jobs_rejected_total %llu\n",
                  (unsigned long long)st->jobs_rejected);
    web_metrics_family(b, "heapfleet_web_request_duration_seconds", "histogram",
           "Time from accepting a data request to its response being ready.");
    for (size_t i = 0; i < HP_ARRAY_SIZE(web_latency_bounds); i++)
        hp_buf_printf(b, "heapfleet_web_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                      web_latency_bounds[i], (unsigned long long)st->lat_bucket[i]);
    hp_buf_printf(b, "heapfleet_web_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
                  (unsigned long long)st->lat_count);
    hp_buf_printf(b, "heapfleet_web_request_duration_seconds_sum %.6f\n", st->lat_sum);
    hp_buf_printf(b, "heapfleet_web_request_duration_seconds_count %llu\n",
                  (unsigned long long)st->lat_count);
    double rss = process_rss();
    if (!isnan(rss)) {
        web_metrics_family(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
        hp_buf_printf(b, "process_resident_memory_bytes %.0f\n", rss);
    }
    web_metrics_family(b, "process_start_time_seconds", "gauge",
           "Start time of the web server since the Unix epoch in seconds.");
    hp_buf_printf(b, "process_start_time_seconds %.3f\n", (double)st->started_ms / 1000.0);
    node_metrics(r, b);
    if (r->src->metrics)
        (void)r->src->metrics(r->src_ctx, b);
    r->status = 200;
    r->content_type = "text/plain; version=0.0.4; charset=utf-8";
}
