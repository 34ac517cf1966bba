/* The folder source (web_folder_lib): a folder of profile files as a web
 * data source, for hf-web, demos and the tests. It sits above web/ because
 * it parses (collector/ingest) and symbolizes (collector/sym) the files
 * itself; web_lib serves what a source gives it and links neither. */
#ifndef HP_WEB_FOLDER_H
#define HP_WEB_FOLDER_H

#include "store/hp.h"
#include "web/web.h"

/* A source backed by a folder: each subfolder is a node (its name), each
 * regular file in it a snapshot of that node, taken at the file's mtime.
 * Files are parsed on demand (any format ingest detects), symbolized with
 * the binaries their maps name on this host (one cached symbolizer, used
 * under a lock), and their totals cached by (path, size, mtime). Snapshot ids are assigned in scan order and
 * stay stable for the life of the source. Thread-safe. */
struct web_source_dir;
int web_source_dir_new(const char *dir, struct web_source_dir **ret, struct hp_buf *err);
void web_source_dir_free(struct web_source_dir *d);
extern const struct web_source_ops web_source_dir_ops;

#endif
