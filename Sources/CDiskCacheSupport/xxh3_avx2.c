// XXH3-64 from xxHash's own header (libxxhash-dev), compiled here for AVX2. Debian's
// libxxhash is built for the x86-64 baseline (SSE2), which hashes at about half the speed
// on the same machine; every vector path gives the same result (xxHash guarantees it), so
// the choice is made at run time by `cdiskcache_xxh3_64` (xxh3.c).
#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#pragma clang attribute push (__attribute__((target("avx2"))), apply_to = function)
#define XXH_INLINE_ALL
#define XXH_VECTOR 2 /* XXH_AVX2 */
#include <xxhash.h>
#include <sys/types.h>
uint64_t cdiskcache_xxh3_64_avx2(const void *bytes, size_t count) {
    return XXH3_64bits(bytes, count);
}
#define READ_HASH_NAME cdiskcache_read_hashing_avx2
#include "read_hash.inc"
#pragma clang attribute pop
#endif
