/* fleet: placeholder */
#include "query/query.h"
