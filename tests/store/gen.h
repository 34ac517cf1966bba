/* Test and benchmark helpers for the store: a generator of realistic,
 * symbolized jemalloc-like profiles (with their heap_v2 text, so raw dumps
 * have a real dump's size and texture) that drift a little from hour to
 * hour like a steady node's, and a canonical text form of a profile for
 * comparing profiles regardless of index order. */
#ifndef HP_TESTS_STORE_GEN_H
#define HP_TESTS_STORE_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "store/hp.h"
#include "store/profile.h"

struct gen_params {
    uint64_t seed;      /* the node: same seed, same code and call tree */
    uint32_t nstacks;   /* distinct stacks */
    uint32_t nfuncs;    /* distinct functions */
    uint32_t hour;      /* drift step: a few % of samples change per hour */
    uint32_t nthreads;  /* per-thread breakdown (0: none) */
    uint64_t load_bias; /* ASLR: where the main binary is mapped */
    bool symbolize;     /* attach frames (else addresses only) */
    uint64_t build;     /* nonzero: the code, its build ids and call tree are
                         * this build's, shared by every seed given it; the
                         * seed keeps the node's values and drift */
};

/* A finished profile; *ret_raw (malloc'd) is the same profile as jemalloc
 * heap_v2 text. */
struct profile *gen_profile(const struct gen_params *gp, char **ret_raw, size_t *ret_raw_len);

/* Sorted, index-free text of everything in a profile (header, mappings,
 * threads, each sample with its stack's addresses and frames, raw and
 * un-sampled values). Two profiles are equal when their canon texts are. */
char *gen_canon(const struct profile *p);

#endif
