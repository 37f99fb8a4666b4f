// What checking a stored body against its XXH3-64 costs when the body is then sent from its
// file (`sendfile`), so its bytes need not land in a buffer: FILES page-cached files of SIZE
// bytes (default 100 of 1 MiB, more than the CPU's caches hold, as the server benchmark's
// 1 MB hits are), each checked in turn by one of four ways:
//   read 64K   pread through one 64 KiB buffer, hashed piece by piece (cdiskcache_hash_file)
//   read 1M    pread through one 1 MiB buffer, the same
//   map each   mmap the file, hash the mapping, munmap
//   map kept   hash a mapping made once per file (what Sources/DiskCache/Internal/Server/MappedBodies.swift keeps)
// Three rounds of ITERATIONS checks per way; prints µs per MiB checked.
//
//   clang -O2 -march=native Benchmarks/c/mapped-check.c -o /tmp/mapped-check
//   cd "$(mktemp -d -p /var/tmp)" && /tmp/mapped-check 1048576 100 2000
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned long long read_hash(int fd, size_t size, unsigned char *buffer, size_t chunk) {
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    for (size_t done = 0; done < size;) {
        ssize_t got = pread(fd, buffer, chunk, (off_t)done);
        if (got <= 0) exit(1);
        XXH3_64bits_update(&state, buffer, (size_t)got);
        done += (size_t)got;
    }
    return XXH3_64bits_digest(&state);
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? (size_t)atol(argv[1]) : 1 << 20;
    int files = argc > 2 ? atoi(argv[2]) : 100;
    int iterations = argc > 3 ? atoi(argv[3]) : 2000;
    unsigned char *bytes = malloc(size), *buffer = aligned_alloc(64, 1 << 20);
    int *fds = calloc((size_t)files, sizeof *fds);
    void **kept = calloc((size_t)files, sizeof *kept);
    if (!bytes || !buffer || !fds || !kept) return 1;
    for (int f = 0; f < files; f++) {
        char name[32];
        snprintf(name, sizeof name, "body%d", f);
        for (size_t i = 0; i < size; i++) bytes[i] = (unsigned char)rand();
        fds[f] = open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fds[f] < 0 || write(fds[f], bytes, size) != (ssize_t)size) return 1;
        kept[f] = mmap(NULL, size, PROT_READ, MAP_SHARED, fds[f], 0);
        if (kept[f] == MAP_FAILED) return 1;
    }
    const char *names[] = {"read 64K", "read 1M", "map each", "map kept"};
    unsigned long long sink = 0;
    for (int round = 0; round < 3; round++) {
        for (int way = 0; way < 4; way++) {
            double start = now();
            for (int i = 0; i < iterations; i++) {
                int f = i % files;
                if (way == 0) sink += read_hash(fds[f], size, buffer, 64 << 10);
                else if (way == 1) sink += read_hash(fds[f], size, buffer, 1 << 20);
                else if (way == 2) {
                    void *mapped = mmap(NULL, size, PROT_READ, MAP_SHARED, fds[f], 0);
                    if (mapped == MAP_FAILED) return 1;
                    sink += XXH3_64bits(mapped, size);
                    munmap(mapped, size);
                } else sink += XXH3_64bits(kept[f], size);
            }
            double micros = (now() - start) / iterations * 1e6;
            printf("round %d  %-9s %8.1f us per MiB\n", round + 1, names[way], micros * (double)(1 << 20) / (double)size);
        }
    }
    return sink == 42;
}
