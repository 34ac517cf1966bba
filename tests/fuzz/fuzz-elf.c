/* Fuzz target: the symbolizer's ELF and DWARF loaders on arbitrary bytes.
 * The input becomes a memfd (libdwarf reads by file descriptor), then goes
 * through everything a profile would make the symbolizer do with a file:
 * identity, PT_LOADs and symbols (libelf), the CU index, lazy CU parsing
 * on two threads, inline chains and names (libdwarf), and the public batch
 * API. Nothing may crash, hang or leak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "collector/sym/sym-internal.h"
#include "collector/sym/sym.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sym_elf_identity id;
    (void)sym_elf_identity_mem(data, size, &id, NULL);

    int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

    uint64_t addrs[24];
    size_t n = 0;
    struct sym_elf *e = NULL;
    if (sym_elf_open(path, &e, NULL) == 0) {
        for (size_t i = 0; i < e->nsyms && n < 12; i += 1 + e->nsyms / 12)
            addrs[n++] = e->syms[i].addr + e->syms[i].size / 2;
        uint64_t v;
        if (sym_elf_offset_to_vaddr(e, 0x1000, &v))
            addrs[n++] = v;
        (void)sym_elf_check_mapping(e, 0x1000, 0x2000, NULL);
        (void)sym_elf_symbol_at(e, 0x1234, NULL);
        sym_elf_free(e);
    }
    for (uint64_t a = 0x1000; n < HP_ARRAY_SIZE(addrs); a += 0x137)
        addrs[n++] = a;

    struct sym_dw *d = NULL;
    if (sym_dw_open(path, &d, NULL) == 0) {
        sym_dw_prepare(d, addrs, n, 2);
        struct sym_dw_frame fr[SYM_MAX_INLINE_DEPTH];
        for (size_t i = 0; i < n; i++) {
            int k = sym_dw_lookup(d, addrs[i], fr, SYM_MAX_INLINE_DEPTH);
            for (int j = 0; j < k; j++)
                if (fr[j].name && strlen(fr[j].name) > size + 4096)
                    abort();
        }
        sym_dw_free(d);
    }

    struct symbolizer *s = sym_new(&(struct sym_options){
        .debuginfod_urls = "", .no_system_debug = true });
    struct sym_batch b;
    if (sym_batch_resolve(s, path, addrs, n, &b, NULL) == 0)
        sym_batch_release(&b);
    sym_free(s);
    close(fd);
    return 0;
}
