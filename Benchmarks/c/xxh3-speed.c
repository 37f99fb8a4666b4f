// XXH3-64 throughput on this CPU with each vector unit xxHash has (1 SSE2, 2 AVX2, 3 AVX-512),
// hashing one 256 KiB buffer 20,000 times, in plain C from libxxhash-dev's header.
//
//   for v in 1 2 3; do flags=""; [ $v = 2 ] && flags=-mavx2; [ $v = 3 ] && flags=-mavx512f
//     clang -O2 -DXXH_VECTOR=$v $flags Benchmarks/c/xxh3-speed.c -o /tmp/xxh3-$v && /tmp/xxh3-$v; done
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    const size_t size = 256 * 1024;
    const int rounds = 20000;
    char *buffer = malloc(size);
    memset(buffer, 7, size);
    unsigned long long sink = 0;
    double start = now();
    for (int i = 0; i < rounds; i++) sink += XXH3_64bits(buffer, size);
    double elapsed = now() - start;
    printf("XXH_VECTOR %d: %.1f GB/s, %.1f us per 256 KiB (%llx)\n", XXH_VECTOR,
           size * (double)rounds / elapsed / 1e9, elapsed / rounds * 1e6, sink);
    return 0;
}
