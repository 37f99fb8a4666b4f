// XXH3-64 with the widest vector unit this CPU has (see xxh3_avx2.c).
#include "CDiskCacheSupport.h"
#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__x86_64__) && defined(__clang__)
#include <stdatomic.h>

uint64_t cdiskcache_xxh3_64_avx2(const void *bytes, size_t count);
ssize_t cdiskcache_read_hashing_avx2(int fd, void *buffer, size_t count, uint64_t *hash);

static int has_avx2(void) {
    // Atomic because the first calls can come from several threads at once: they all compute
    // the same answer, but on a plain int that is still a data race (and a TSan report).
    static _Atomic int known = -1;
    int value = atomic_load_explicit(&known, memory_order_relaxed);
    if (value < 0) {
        __builtin_cpu_init();
        value = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&known, value, memory_order_relaxed);
    }
    return value;
}
#endif

uint64_t cdiskcache_xxh3_64(const void *bytes, size_t count) {
#if defined(__x86_64__) && defined(__clang__)
    if (count >= 256 && has_avx2()) return cdiskcache_xxh3_64_avx2(bytes, count);
#endif
    return XXH3_64bits(bytes, count);
}

#define READ_HASH_NAME read_hashing_baseline
#include "read_hash.inc"

ssize_t cdiskcache_read_hashing(int fd, void *buffer, size_t count, uint64_t *hash) {
#if defined(__x86_64__) && defined(__clang__)
    if (has_avx2()) return cdiskcache_read_hashing_avx2(fd, buffer, count, hash);
#endif
    return read_hashing_baseline(fd, buffer, count, hash);
}
