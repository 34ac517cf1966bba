/* query: the analysis library (aggregation, diff, trends, leaks, fleet,
 * discrepancy) and the renderers (text, collapsed, dot, svg, pprof, json).
 * It works on the profile model only (store/profile.h) and on stored data
 * through store/store.h; it never fetches, parses raw bytes or symbolizes. */
#ifndef HP_QUERY_H
#define HP_QUERY_H

#include "store/hp.h"
#include "store/profile.h"

#endif
