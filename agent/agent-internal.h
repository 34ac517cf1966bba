/* agent internals shared by binidx.c, server.c and main.c; nothing outside
 * agent/ includes this. */
#ifndef HP_AGENT_INTERNAL_H
#define HP_AGENT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/agent.h"
#include "collector/sym/sym.h"

/* ---- binaries by path and build-id ---------------------------------------
 * The set of binaries the agent will describe or serve: every file mapped
 * (its /proc/PID/maps) by a running process the agent watches (the
 * --pid-file's, else the processes the newest dumps' names give), plus the
 * files (and files under the folders) given with --binaries. Nothing else:
 * a client cannot make the agent read an arbitrary path, and a dump's
 * MAPPED_LIBRARIES (anyone who can write into a dump folder writes it)
 * adds nothing. Debug files for a known
 * build-id are also looked up in /usr/lib/debug/.build-id/ (what Debian's
 * -dbgsym packages install). Thread-safe (one mutex); blocking: worker
 * threads only. */
struct agent_binidx;

struct agent_binidx *agent_binidx_new(const struct agent_folders *folders,
                                      const char *binaries_csv, const char *pid_file);
/* The pid in a --pid-file (one decimal number). 0, or <0 with err. */
int agent_pid_file_read(const char *path, int64_t *ret_pid, struct hp_buf *err);
void agent_binidx_free(struct agent_binidx *x);

/* Identity of a known binary. 1 found (*ret filled), 0 not a known binary,
 * <0 error reading it (reason in err). */
int agent_binidx_identity(struct agent_binidx *x, const char *path,
                          struct sym_elf_identity *ret, struct hp_buf *err);

/* Open the file with this build-id: the binary itself (debuginfo = false) or
 * a file carrying its DWARF (debuginfo = true: a separate debug file, else the
 * binary itself when it is not stripped). 1 and an O_RDONLY fd, 0 unknown
 * build-id, <0 error. */
int agent_binidx_open(struct agent_binidx *x, const char *build_id_hex, bool debuginfo,
                      int *ret_fd, uint64_t *ret_size, struct hp_buf *err);

/* ---- server ---------------------------------------------------------------- */

struct agent_config {
    const char *dumps;      /* comma-separated folders */
    const char *listen;     /* HOST:PORT, [V6]:PORT */
    const char *token_file; /* NULL: no authentication */
    const char *pid_file;   /* NULL: pid from the newest dump's name */
    const char *binaries;   /* comma-separated files or folders, may be NULL */
    unsigned keep;          /* 0: no housekeeping */
    unsigned keep_every_s;  /* housekeeping period */
    bool insecure_listen;   /* allow a non-loopback listen without a token */
    const char *tls_cert;   /* PEM certificate (chain): serve HTTPS; NULL: plain HTTP */
    const char *tls_key;    /* its private key (default: in tls_cert) */
};

/* Run the agent until SIGINT/SIGTERM. 0 on a clean stop, <0 when it could not
 * start (reason in err). */
int agent_run(const struct agent_config *cfg, struct hp_buf *err);

#endif
