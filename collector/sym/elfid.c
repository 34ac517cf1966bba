/* ELF identity (see sym.h, "ELF identity"). Reads only section headers and the notes, so it
 * is cheap on large binaries; everything libelf returns is bounds-checked by
 * libelf itself against the image size. */
#include "collector/sym/sym.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void elf_version_once(void)
{
    static _Atomic int done;
    if (!done) {
        elf_version(EV_CURRENT);
        done = 1;
    }
}

static void hexify(const unsigned char *b, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static int identity_from_elf(Elf *e, struct sym_elf_identity *ret, struct hp_buf *err,
                             const char *what)
{
    if (elf_kind(e) != ELF_K_ELF) {
        hp_err_printf(err, "%s: not an ELF file", what);
        return HP_EELF;
    }
    size_t shstrndx;
    if (elf_getshdrstrndx(e, &shstrndx) != 0) {
        hp_err_printf(err, "%s: corrupt ELF section headers: %s", what, elf_errmsg(-1));
        return HP_EELF;
    }
    ret->build_id[0] = '\0';
    ret->debuglink[0] = '\0';
    ret->altlink[0] = '\0';
    ret->altlink_build_id[0] = '\0';
    ret->has_debug_info = false;
    ret->has_symtab = false;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        if (!name)
            continue;
        if (sh.sh_type == SHT_SYMTAB)
            ret->has_symtab = true;
        if (strcmp(name, ".debug_info") == 0 || strcmp(name, ".zdebug_info") == 0)
            ret->has_debug_info = sh.sh_type != SHT_NOBITS;
        if (sh.sh_type == SHT_NOTE && !ret->build_id[0]) {
            Elf_Data *d = elf_getdata(scn, NULL);
            if (!d)
                continue;
            GElf_Nhdr nh;
            size_t off = 0, name_off, desc_off;
            while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
                if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                    memcmp((char *)d->d_buf + name_off, "GNU", 4) == 0 && nh.n_descsz > 0 &&
                    nh.n_descsz <= SYM_BUILD_ID_MAX) {
                    hexify((const unsigned char *)d->d_buf + desc_off, nh.n_descsz,
                           ret->build_id);
                    break;
                }
            }
        }
        if (strcmp(name, ".gnu_debuglink") == 0 && sh.sh_type != SHT_NOBITS) {
            Elf_Data *d = elf_getdata(scn, NULL);
            if (d && d->d_size > 0) {
                size_t n = strnlen(d->d_buf, d->d_size);
                if (n > 0 && n < sizeof(ret->debuglink)) {
                    memcpy(ret->debuglink, d->d_buf, n);
                    ret->debuglink[n] = '\0';
                }
            }
        }
        /* dwz's common file: a NUL-terminated path, then the build-id of
         * the file it names (the rest of the section). */
        if (strcmp(name, ".gnu_debugaltlink") == 0 && sh.sh_type != SHT_NOBITS) {
            Elf_Data *d = elf_getdata(scn, NULL);
            if (d && d->d_size > 0) {
                size_t n = strnlen(d->d_buf, d->d_size);
                size_t idn = n < d->d_size ? d->d_size - n - 1 : 0;
                if (n > 0 && n < sizeof(ret->altlink) && idn > 0 && idn <= SYM_BUILD_ID_MAX) {
                    memcpy(ret->altlink, d->d_buf, n);
                    ret->altlink[n] = '\0';
                    hexify((const unsigned char *)d->d_buf + n + 1, idn, ret->altlink_build_id);
                }
            }
        }
    }
    return 0;
}

int sym_elf_identity_read(const char *path, struct sym_elf_identity *ret, struct hp_buf *err)
{
    elf_version_once();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        hp_err_printf(err, "%s: cannot open: %s", path, strerror(e));
        return HP_ERR(e);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        hp_err_printf(err, "%s: not a regular file", path);
        return HP_EELF;
    }
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int r;
    if (!e) {
        hp_err_printf(err, "%s: cannot read as ELF: %s", path, elf_errmsg(-1));
        r = HP_EELF;
    } else {
        struct sym_elf_identity id;
        r = identity_from_elf(e, &id, err, path);
        if (r == 0) {
            id.size = (uint64_t)st.st_size;
            *ret = id;
        }
        elf_end(e);
    }
    close(fd);
    return r;
}

int sym_elf_identity_mem(const void *data, size_t len, struct sym_elf_identity *ret,
                         struct hp_buf *err)
{
    elf_version_once();
    Elf *e = elf_memory((char *)data, len);
    if (!e) {
        hp_err_printf(err, "in-memory image: cannot read as ELF: %s", elf_errmsg(-1));
        return HP_EELF;
    }
    struct sym_elf_identity id;
    int r = identity_from_elf(e, &id, err, "in-memory image");
    if (r == 0) {
        id.size = len;
        *ret = id;
    }
    elf_end(e);
    return r;
}
