/* Private to the collector executable: pieces main.c wires together. */
#ifndef HP_COLLECTOR_INTERNAL_H
#define HP_COLLECTOR_INTERNAL_H

#include "collector/daemon.h"

/* The web API/UI on the daemon's loop, serving the store at db. listen is
 * "HOST:PORT"; static_dir the UI files (NULL: API only); token_file optional;
 * sink (the store sink, borrowed) adds the collector's health to /metrics. */
int collector_web_service_new(const char *listen, const char *db, const char *static_dir,
                              const char *token_file, struct collector_sink *sink,
                              struct collector_service **ret, struct hp_buf *err) HP_MUST_CHECK;
void collector_web_service_free(struct collector_service *s);

#endif
