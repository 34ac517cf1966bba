/* ELF identity: the GNU build-id note and size of an object file, used to
 * check that a binary found on this host (or served by a node's agent) is the
 * one a profile was taken from, and to key symbol caches.
 *
 * Thread context: any thread. */
#ifndef HP_SYM_ELFID_H
#define HP_SYM_ELFID_H

#include <stdint.h>

#include "store/hp.h"

#define SYM_BUILD_ID_MAX 64 /* bytes; hex form needs 2x + 1 */

struct sym_elf_identity {
    char build_id[2 * SYM_BUILD_ID_MAX + 1]; /* lowercase hex, "" when the file has none */
    uint64_t size;                          /* file size in bytes */
    char debuglink[256];                    /* .gnu_debuglink file name, "" if none */
    bool has_debug_info;                    /* has .debug_info (or .zdebug_info) */
    bool has_symtab;                        /* has .symtab */
};

/* Read the identity of an ELF file. 0, or HP_EELF (not ELF / corrupt) or a
 * negated errno, with the reason appended to err. */
int sym_elf_identity_read(const char *path, struct sym_elf_identity *ret, struct hp_buf *err);

/* Same, for an ELF image in memory (fuzzing, files fetched over HTTP). */
int sym_elf_identity_mem(const void *data, size_t len, struct sym_elf_identity *ret,
                         struct hp_buf *err);

#endif
