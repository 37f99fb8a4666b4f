// XXH3-64 by xxHash's portable code (no vector unit), compiled on its own: the reference the
// tests check cdiskcache_xxh3_64's vector paths against.
#include "CDiskCacheSupport.h"
#define XXH_VECTOR 0 /* XXH_SCALAR */
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t cdiskcache_xxh3_64_scalar(const void *bytes, size_t count) {
    return XXH3_64bits(bytes, count);
}
