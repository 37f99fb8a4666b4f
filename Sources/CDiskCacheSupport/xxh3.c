// XXH3-64 with the widest vector unit this CPU has (see xxh3_avx2.c and xxh3_avx512.c), and
// XXH3-128 for keys: the package's one binding of xxHash (its header, libxxhash-dev, inlined).
#include "CDiskCacheSupport.h"
#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__x86_64__) && defined(__clang__)
#include <stdatomic.h>

uint64_t cdiskcache_xxh3_64_avx2(const void *bytes, size_t count);
ssize_t cdiskcache_read_hashing_avx2(int fd, void *buffer, size_t count, uint64_t *hash, int without_waiting);
uint64_t cdiskcache_xxh3_64_avx512(const void *bytes, size_t count);
void cdiskcache_xxh3_update_avx2(void *state, const void *bytes, size_t count);
void cdiskcache_xxh3_update_avx512(void *state, const void *bytes, size_t count);
ssize_t cdiskcache_read_hashing_avx512(int fd, void *buffer, size_t count, uint64_t *hash, int without_waiting);
ssize_t cdiskcache_hash_file_avx2(int fd, off_t offset, size_t count, uint64_t *hash, int without_waiting);
ssize_t cdiskcache_hash_file_avx512(int fd, off_t offset, size_t count, uint64_t *hash, int without_waiting);

enum { VECTOR_BASELINE = 0, VECTOR_AVX2 = 1, VECTOR_AVX512 = 2 };

/// The widest vector unit this CPU and its operating system support (the compiler runtime's
/// check includes the OS saving the wider registers).
static int vector_unit(void) {
    // Atomic because the first calls can come from several threads at once: they all compute
    // the same answer, but on a plain int that is still a data race (and a TSan report).
    static _Atomic int known = -1;
    int value = atomic_load_explicit(&known, memory_order_relaxed);
    if (value < 0) {
        __builtin_cpu_init();
        value = __builtin_cpu_supports("avx512f") ? VECTOR_AVX512
              : __builtin_cpu_supports("avx2") ? VECTOR_AVX2 : VECTOR_BASELINE;
        atomic_store_explicit(&known, value, memory_order_relaxed);
    }
    return value;
}
#endif

uint64_t cdiskcache_xxh3_64(const void *bytes, size_t count) {
#if defined(__x86_64__) && defined(__clang__)
    if (count >= 256) {
        switch (vector_unit()) {
        case VECTOR_AVX512: return cdiskcache_xxh3_64_avx512(bytes, count);
        case VECTOR_AVX2: return cdiskcache_xxh3_64_avx2(bytes, count);
        default: break;
        }
    }
#endif
    return XXH3_64bits(bytes, count);
}

void cdiskcache_xxh3_128(const void *bytes, size_t count, uint64_t *high, uint64_t *low) {
    XXH128_hash_t digest = XXH3_128bits(bytes, count);
    *high = digest.high64;
    *low = digest.low64;
}

#define READ_HASH_NAME read_hashing_baseline
#define HASH_FILE_NAME hash_file_baseline
#include "read_hash.inc"

ssize_t cdiskcache_read_hashing(int fd, void *buffer, size_t count, uint64_t *hash, int without_waiting) {
#if defined(__x86_64__) && defined(__clang__)
    switch (vector_unit()) {
    case VECTOR_AVX512: return cdiskcache_read_hashing_avx512(fd, buffer, count, hash, without_waiting);
    case VECTOR_AVX2: return cdiskcache_read_hashing_avx2(fd, buffer, count, hash, without_waiting);
    default: break;
    }
#endif
    return read_hashing_baseline(fd, buffer, count, hash, without_waiting);
}

ssize_t cdiskcache_hash_file(int fd, off_t offset, size_t count, uint64_t *hash, int without_waiting) {
#if defined(__x86_64__) && defined(__clang__)
    switch (vector_unit()) {
    case VECTOR_AVX512: return cdiskcache_hash_file_avx512(fd, offset, count, hash, without_waiting);
    case VECTOR_AVX2: return cdiskcache_hash_file_avx2(fd, offset, count, hash, without_waiting);
    default: break;
    }
#endif
    return hash_file_baseline(fd, offset, count, hash, without_waiting);
}

void *cdiskcache_xxh3_state_create(void) {
    XXH3_state_t *state = XXH3_createState();
    if (state != NULL) XXH3_64bits_reset(state);
    return state;
}

void cdiskcache_xxh3_state_free(void *state) {
    XXH3_freeState((XXH3_state_t *)state);
}

void cdiskcache_xxh3_update(void *state, const void *bytes, size_t count) {
#if defined(__x86_64__) && defined(__clang__)
    switch (vector_unit()) {
    case VECTOR_AVX512: cdiskcache_xxh3_update_avx512(state, bytes, count); return;
    case VECTOR_AVX2: cdiskcache_xxh3_update_avx2(state, bytes, count); return;
    default: break;
    }
#endif
    XXH3_64bits_update((XXH3_state_t *)state, bytes, count);
}

uint64_t cdiskcache_xxh3_digest(const void *state) {
    return XXH3_64bits_digest((const XXH3_state_t *)state);
}
