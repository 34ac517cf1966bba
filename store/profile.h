/* The profile model: the vocabulary that parsers produce and the symbolizer,
 * store, query engine and web front end consume.
 *
 * A profile is a set of samples; each sample points at a stack and carries the
 * four heap figures (in-use objects/bytes, allocated objects/bytes) both as the
 * dump recorded them (raw) and un-sampled (value, see query/INTERNALS.md). A
 * stack is a list of locations, leaf first. A location is one address (or, for
 * formats that carry only names, one name); once symbolized it owns one or more
 * frames, innermost inlined frame first, as `addr2line -i` prints them.
 *
 * Addresses are stored as jeprof uses them: the leaf address of every stack as
 * recorded, every caller address minus one (a return address points after the
 * call), so the same caller line is found for every stack through it.
 *
 * Memory: one arena per profile holds strings; arrays grow with realloc. All
 * `const char *` inside a profile live as long as the profile.
 * Thread context: a profile is used by one thread at a time. */
#ifndef HP_PROFILE_H
#define HP_PROFILE_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/hp.h"

enum profile_format {
    PROFILE_FORMAT_UNKNOWN = 0,
    PROFILE_FORMAT_JEMALLOC,  /* jemalloc prof.dump "heap_v2/<period>" */
    PROFILE_FORMAT_GPERF,     /* gperftools "heap profile: ..." */
    PROFILE_FORMAT_PPROF,     /* profile.proto, gzipped or not */
    PROFILE_FORMAT_COLLAPSED, /* "a;b;c 1234" lines */
};

/* How raw figures become estimates of the real ones (query/INTERNALS.md). */
enum profile_scaling {
    PROFILE_SCALING_NONE = 0, /* every allocation recorded, or already scaled */
    PROFILE_SCALING_V1,       /* gperftools "heap/N": ratio = avg/(N/2), scale if < 1 */
    PROFILE_SCALING_V2,       /* Poisson: 1/(1-exp(-avg/period)) per stack */
};

/* Sample values, in jeprof's HeapProfileIndex order. */
enum profile_value {
    PV_INUSE_OBJECTS = 0,
    PV_INUSE_SPACE = 1,
    PV_ALLOC_OBJECTS = 2,
    PV_ALLOC_SPACE = 3,
    PV_COUNT = 4,
};

enum profile_mapping_flags {
    PROFILE_MAP_EXEC = 1 << 0,    /* mapped executable (x in perms) */
    PROFILE_MAP_DELETED = 1 << 1, /* "(deleted)" after the path */
    PROFILE_MAP_SPECIAL = 1 << 2, /* [vdso], [heap], [stack], ... */
    PROFILE_MAP_ANON = 1 << 3,    /* no file (JIT code, anonymous memory) */
};

struct profile_mapping {
    uint64_t start, limit; /* runtime address range [start, limit) */
    uint64_t offset;       /* file offset of `start` */
    uint64_t inode;
    const char *path;     /* "" when anonymous; never NULL */
    const char *build_id; /* lowercase hex, or NULL when the dump has none */
    char perms[5];
    uint32_t flags;
};

/* function and file are interned in the profile's strings (p->strings:
 * profile_intern, profile_location_set_frames), so their numbers
 * (profile_string_id) index tables over a profile's names. */
struct profile_frame {
    const char *function; /* display name (demangled); NULL if unknown */
    const char *file;     /* source file; NULL if unknown */
    uint32_t line;        /* 0 if unknown */
};

enum profile_location_flags {
    PROFILE_LOC_SYMBOLIZED = 1 << 0, /* symbolization was attempted and frames are final */
    PROFILE_LOC_ALLOCATOR = 1 << 1,  /* inside the allocator itself: trimmed from the leaf */
    PROFILE_LOC_NAMED = 1 << 2,      /* name-only location (collapsed input) */
};

struct profile_location {
    uint64_t address;   /* lookup address (callers already minus one); 0 if named */
    uint32_t mapping;   /* index + 1 into mappings, 0 if none */
    uint32_t frame_off; /* first frame in profile.frames */
    uint32_t nframes;   /* 0 until symbolized; innermost frame first */
    uint32_t flags;
};

struct profile_stack {
    uint32_t off; /* first location index in profile.stack_locs */
    uint32_t n;   /* number of locations, leaf first */
};

struct profile_sample {
    uint32_t stack;
    uint32_t thread;         /* 0: all threads; else index + 1 into threads */
    int64_t raw[PV_COUNT];   /* as recorded in the dump */
    double value[PV_COUNT];  /* un-sampled estimate (profile_unsample) */
};

struct profile_thread {
    uint64_t id;
    const char *name; /* NULL when unnamed */
    int64_t raw[PV_COUNT];
};

struct profile {
    struct hp_arena arena;
    struct hp_strtab strings;

    enum profile_format format;
    enum profile_scaling scaling;
    uint64_t period;        /* sampling period in bytes; 1 = every allocation */
    bool has_alloc;         /* the alloc columns carry data */
    bool has_header_totals; /* header_raw is meaningful */
    int64_t header_raw[PV_COUNT]; /* totals as the header states them */
    int64_t time_ns;        /* the dump's own time hint, 0 if none */
    const char *hint;       /* producer hints ("jemalloc 5.3 unbiased"...), or NULL */
    const char *value_unit[PV_COUNT]; /* "bytes"/"count"; for pprof inputs */
    /* Which values the input carries, one bit per PV_* (1u << PV_...). 0 means
     * all of them: the text formats always state both pairs. A pprof file
     * with only alloc_* types sets just those bits, so asking it for
     * inuse_space is an error rather than a total of 0. */
    uint8_t values_present;
    /* Input lines a text reader skipped as not part of the profile
     * (comments and invalid lines in collapsed stacks); the first is
     * described in skipped_first ("line 3: \"...\""), NULL when none. */
    uint64_t lines_skipped;
    const char *skipped_first;

    struct profile_sample *samples; /* one per distinct stack, all threads */
    size_t nsamples, samples_cap;
    struct profile_sample *thread_samples; /* per-thread breakdown, if the format has it */
    size_t nthread_samples, thread_samples_cap;
    struct profile_thread *threads;
    size_t nthreads, threads_cap;

    struct profile_stack *stacks;
    size_t nstacks, stacks_cap;
    uint32_t *stack_locs;
    size_t nstack_locs, stack_locs_cap;

    struct profile_location *locs;
    size_t nlocs, locs_cap;
    struct hp_map64 loc_index; /* address (or interned name pointer) -> location */

    struct profile_frame *frames;
    size_t nframes, frames_cap;

    struct profile_mapping *mappings; /* sorted by start after profile_finish() */
    size_t nmappings, mappings_cap;
};

struct profile *profile_new(enum profile_format fmt);
void profile_free(struct profile *p);

const char *profile_format_name(enum profile_format fmt);
const char *profile_value_name(enum profile_value v); /* "inuse_space"... */
/* Accepts inuse_space, inuse_objects, alloc_space, alloc_objects (and the
 * jeprof spellings with leading dashes stripped). 0 or HP_EPARSE. */
int profile_value_parse(const char *name, enum profile_value *ret);

const char *profile_intern(struct profile *p, const char *s, size_t n);

/* Location for an address, created on first use. Returns its index. */
uint32_t profile_location_for_address(struct profile *p, uint64_t address);
/* A new location that is not entered in the address index: for formats where
 * one address can stand for two different locations (pprof: the same address
 * in two mappings, or with different line tables) or where there is no
 * address at all. `mapping` is index + 1 or 0; profile_finish() keeps it
 * pointing at the same mapping when it sorts them. Returns its index. */
uint32_t profile_location_new(struct profile *p, uint64_t address, uint32_t mapping);
/* Location for a bare function name (formats without addresses). */
uint32_t profile_location_for_name(struct profile *p, const char *name, size_t n);
/* Replace a location's frames (innermost first); strings are interned. */
void profile_location_set_frames(struct profile *p, uint32_t loc,
                                 const struct profile_frame *frames, uint32_t n);

/* Room for this many more stacks, stack locations and (all-threads)
 * samples, so a reader that knows its counts adds them without growing the
 * arrays by copies. */
void profile_reserve(struct profile *p, size_t stacks, size_t stack_locs, size_t samples);
/* Add a stack of location indexes, leaf first. Returns its index. */
uint32_t profile_stack_add(struct profile *p, const uint32_t *locs, uint32_t n);
/* Add a stack of n locations whose indexes the caller writes later, at
 * p->stack_locs + p->stacks[index].off (every one of them, before
 * profile_finish() or any reader sees the profile). For readers that look
 * their locations up late: ingest's address readers overlap the hash-table
 * misses of one stack with the parsing of the next. Returns its index. */
uint32_t profile_stack_add_unset(struct profile *p, uint32_t n);
static inline const uint32_t *profile_stack_locs(const struct profile *p, uint32_t stack)
{
    return p->stack_locs + p->stacks[stack].off;
}

/* The number of s, a string of the profile (a frame's function or file,
 * struct profile_frame), in p->strings: an index for tables over the
 * profile's names. */
static inline uint32_t profile_string_id(const struct profile *p, const char *s)
{
    uint32_t id = hp_strtab_id(&p->strings, s);
    assert(id < p->strings.len && p->strings.by_id[id] == s);
    return id;
}

/* Add an all-threads sample (thread 0) or a per-thread one. Values start equal
 * to raw; profile_unsample() fills them in. Returns the sample pointer, valid
 * until the next add. */
struct profile_sample *profile_sample_add(struct profile *p, uint32_t stack, uint32_t thread,
                                          const int64_t raw[PV_COUNT]);
uint32_t profile_thread_add(struct profile *p, uint64_t id, const char *name, size_t name_len,
                            const int64_t raw[PV_COUNT]);

void profile_mapping_add(struct profile *p, const struct profile_mapping *m);
/* Mapping index + 1 containing addr, or 0. Requires profile_finish(). */
uint32_t profile_mapping_find(const struct profile *p, uint64_t addr);

/* Un-sample every sample with the profile's scaling and period. */
void profile_unsample(struct profile *p);
/* Un-sample one sample (its raw values into value) with p's scaling and
 * period, as profile_unsample does. */
void profile_sample_unsample(const struct profile *p, struct profile_sample *s);
/* Sort mappings, attach each address location to its mapping, un-sample. The
 * parsers call this last. */
void profile_finish(struct profile *p);

/* Sum of un-sampled values over all-threads samples. */
void profile_totals(const struct profile *p, double ret[PV_COUNT]);

/* The jeprof/pprof scale factor for one (count, bytes) pair. */
double profile_scale_factor(enum profile_scaling s, uint64_t period, int64_t count,
                            int64_t bytes);

/* Name of a location's frame i for display: function name, or "0x<addr>"
 * (with " <object basename>" when `with_object` and the mapping is known).
 * Writes into out when it must format; returns a pointer valid until out or
 * the profile changes. */
const char *profile_frame_label(const struct profile *p, uint32_t loc, uint32_t i, char *out,
                                size_t outsz, bool with_object);
/* Stacks reduced to what folding by function reads of them: per stack its
 * locations, leaf first; per location its flags and its frames' labels
 * outermost first (function names, or "0x<addr> <object>" as
 * profile_frame_label gives them with the object). The store builds it
 * (store_stacks_resolve), the analyses fold it (query_fold_map_resolved). */
struct profile_rname {
    const char *s; /* NUL-terminated */
    size_t len;
};
struct profile_rloc {
    uint32_t flags;             /* PROFILE_LOC_* */
    uint32_t name_off, nnames;  /* names[name_off ..], outermost first */
    bool by_address;            /* a name is the address's label ("0x..."): it
                                 * depends on where the process mapped it */
};
struct profile_resolved {
    size_t nstacks;
    uint32_t *stack_off; /* nstacks + 1: stack i is locs[stack_off[i] .. stack_off[i + 1]) */
    uint32_t *locs;      /* indexes into loc, leaf first */
    struct profile_rloc *loc;
    size_t nlocs;
    struct profile_rname *names;
    size_t nnames;
    enum profile_scaling scaling; /* the snapshot's */
    uint64_t period;
    bool from_view; /* built from the view (else from a profile of them all) */
    struct hp_arena arena;
    struct profile *profile; /* what names may point into; freed with it */
};
/* Frees r and what it owns. */
void profile_resolved_free(struct profile_resolved *r);

/* The label of an address without a function name: "0x<addr>", with
 * " <object basename>" when `with_object` and mapping (index + 1, 0 none)
 * is known; written into out. */
const char *profile_address_label(const struct profile *p, uint64_t address, uint32_t mapping,
                                  char *out, size_t outsz, bool with_object);

#endif
