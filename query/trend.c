/* trend: placeholder */
#include "query/query.h"
