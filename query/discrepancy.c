/* discrepancy: placeholder */
#include "query/query.h"
