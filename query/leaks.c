/* leaks: placeholder */
#include "query/query.h"
