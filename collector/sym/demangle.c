/* Names: libiberty demangling (C++ Itanium, Rust legacy and v0) and jeprof's
 * naming rules (ShortFunctionName, the allocator frames that
 * RemoveUninterestingFrames drops), kept identical to /usr/bin/jeprof so that
 * heapfleet and jeprof agree function by function. */
#include "collector/sym/sym-internal.h"

#include <libiberty/demangle.h>
#include <stdlib.h>
#include <string.h>

char *sym_demangle(const char *name)
{
    if (!name || name[0] != '_')
        return NULL;
    /* _Z: Itanium C++ and Rust legacy (which libiberty recognises by its
     * ::h<16 hex> suffix and then drops, unless DMGL_VERBOSE); _R: Rust v0.
     * DMGL_AUTO tries Rust first, then C++; DMGL_RUST alone would refuse C++. */
    if (name[1] != 'Z' && name[1] != 'R')
        return NULL;
    return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
}

const char *sym_display_name(const char *raw, char **ret_owned)
{
    *ret_owned = NULL;
    if (!raw)
        return NULL;
    char *d = sym_demangle(raw);
    if (!d)
        return raw;
    *ret_owned = d;
    return d;
}

/* Remove every innermost "(...)" optionally followed by spaces and "const",
 * once over the string (one pass of Perl's s///g). Returns true if anything
 * was removed. */
static bool strip_args_once(char *s)
{
    bool changed = false;
    char *w = s;
    for (char *r = s; *r;) {
        if (*r == '(') {
            char *q = r + 1;
            while (*q && *q != '(' && *q != ')')
                q++;
            if (*q == ')') {
                q++;
                char *t = q;
                while (*t == ' ' || *t == '\t')
                    t++;
                if (strncmp(t, "const", 5) == 0)
                    q = t + 5;
                r = q;
                changed = true;
                continue;
            }
        }
        *w++ = *r++;
    }
    *w = '\0';
    return changed;
}

static bool strip_templates_once(char *s)
{
    bool changed = false;
    char *w = s;
    for (char *r = s; *r;) {
        if (*r == '<') {
            char *q = r + 1;
            while (*q && *q != '<' && *q != '>')
                q++;
            if (*q == '>') {
                r = q + 1;
                changed = true;
                continue;
            }
        }
        *w++ = *r++;
    }
    *w = '\0';
    return changed;
}

static bool is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

const char *sym_function_short(const char *name, char *out, size_t outsz)
{
    if (outsz == 0)
        return out;
    size_t n = strlen(name);
    if (n >= outsz)
        n = outsz - 1;
    memcpy(out, name, n);
    out[n] = '\0';
    while (strip_args_once(out)) {
    }
    while (strip_templates_once(out)) {
    }
    /* s/^.*\s+(\w+::)/$1/: greedy, so the last whitespace run that is
     * followed by "word::" wins. */
    char *cut = NULL;
    for (char *p = out; *p; p++) {
        if (*p != ' ' && *p != '\t')
            continue;
        char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        char *w = q;
        while (is_word(*w))
            w++;
        if (w > q && w[0] == ':' && w[1] == ':')
            cut = q;
    }
    if (cut)
        memmove(out, cut, strlen(cut) + 1);
    return out;
}

/* jeprof RemoveUninterestingFrames, heap profiles. */
static const char *const alloc_names[] = {
    "calloc", "cfree", "malloc", "newImpl", "void* newImpl", "free", "memalign",
    "posix_memalign", "aligned_alloc", "pvalloc", "valloc", "realloc", "mallocx", "rallocx",
    "xallocx", "dallocx", "sdallocx", "sdallocx_noflags", "tc_calloc", "tc_cfree", "tc_malloc",
    "tc_free", "tc_memalign", "tc_posix_memalign", "tc_pvalloc", "tc_valloc", "tc_realloc",
    "tc_new", "tc_delete", "tc_newarray", "tc_deletearray", "tc_new_nothrow",
    "tc_newarray_nothrow", "do_malloc", "::do_malloc", "::do_malloc_or_cpp_alloc",
    "DoSampledAllocation", "simple_alloc::allocate", "__malloc_alloc_template::allocate",
    "__builtin_delete", "__builtin_new", "__builtin_vec_delete", "__builtin_vec_new",
    "operator new", "operator new[]", "malloc_zone_malloc", "malloc_zone_calloc",
    "malloc_zone_valloc", "malloc_zone_realloc", "malloc_zone_memalign", "malloc_zone_free",
    "__start_google_malloc", "__stop_google_malloc", "__start_malloc_hook",
    "__stop_malloc_hook",
};

bool sym_is_allocator_function(const char *name)
{
    if (!name)
        return false;
    if (strstr(name, "TCMalloc") || strncmp(name, "tcmalloc::", 10) == 0)
        return true;
    /* jeprof also skips each name with a leading "_" (Mach-O). */
    const char *alt = name[0] == '_' ? name + 1 : NULL;
    for (size_t i = 0; i < HP_ARRAY_SIZE(alloc_names); i++)
        if (strcmp(name, alloc_names[i]) == 0 || (alt && strcmp(alt, alloc_names[i]) == 0))
            return true;
    return false;
}
