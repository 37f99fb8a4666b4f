// What checking every byte costs a get of a large body, read the way the store reads it:
// FILES page-cached files of SIZE bytes (default 64 of 4 MiB, as the default bench's 4M
// entries: more than the CPU's caches hold), read at random into fresh memory (malloc, as a
// get does), either with one plain pread (the floor's read) or with the store's own C routine
// `cdiskcache_read_hashing` (pread and XXH3-64 in 1 MiB chunks, the widest vector unit the CPU
// has). Three rounds of ITERATIONS reads per way, in turn; prints µs per read.
//
//   S=Sources/CDiskCacheSupport
//   clang -O2 -I$S/include -I$S Benchmarks/c/read-hash-many.c $S/xxh3.c $S/xxh3_avx2.c \
//       $S/xxh3_avx512.c $S/support.c -o /tmp/read-hash-many
//   cd "$(mktemp -d -p /var/tmp)" && /tmp/read-hash-many 4194304 64 600
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

ssize_t cdiskcache_read_hashing(int fd, void *buffer, size_t count, uint64_t *hash, int without_waiting);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? (size_t)atol(argv[1]) : 4 << 20;
    int files = argc > 2 ? atoi(argv[2]) : 64;
    int iterations = argc > 3 ? atoi(argv[3]) : 600;
    char name[64];
    unsigned char *bytes = malloc(size);
    if (!bytes || files < 1) return 1;
    for (size_t i = 0; i < size; i++) bytes[i] = (unsigned char)rand();
    for (int f = 0; f < files; f++) {
        snprintf(name, sizeof name, "body-%d", f);
        int fd = open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
        bytes[0] = (unsigned char)f;
        if (fd < 0 || write(fd, bytes, size) != (ssize_t)size) return 1;
        close(fd);
    }
    free(bytes);
    unsigned long long sink = 0;
    for (int round = 0; round < 3; round++) {
        for (int way = 0; way < 2; way++) {
            unsigned random = 7;
            double start = now();
            for (int i = 0; i < iterations; i++) {
                random = random * 1103515245u + 12345u;
                snprintf(name, sizeof name, "body-%u", (random >> 8) % (unsigned)files);
                int fd = open(name, O_RDONLY);
                unsigned char *buffer = malloc(size);
                if (fd < 0 || !buffer) return 1;
                if (way == 0) {
                    if (pread(fd, buffer, size, 0) != (ssize_t)size) return 1;
                    sink += buffer[size - 1];
                } else {
                    uint64_t hash;
                    if (cdiskcache_read_hashing(fd, buffer, size, &hash, 0) != (ssize_t)size) return 1;
                    sink += hash;
                }
                free(buffer);
                close(fd);
            }
            printf("%-26s %7.1f us\n", way == 0 ? "pread" : "pread + XXH3 (the store's)",
                   (now() - start) / iterations * 1e6);
        }
    }
    return sink == 42;
}
