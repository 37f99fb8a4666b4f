// What a checked read of a large body costs, and in what chunks to read it: one page-cached
// file of SIZE bytes (default 4 MiB) read into fresh memory (malloc, as a get does), either
// alone with one pread, or with the XXH3-64 of the bytes computed chunk by chunk as they
// arrive (pread of a chunk, then XXH3_64bits_update over it), for chunks of 128 KiB to 4 MiB.
// Three rounds of ITERATIONS reads per way; prints µs per read. The store reads body files
// in 1 MiB chunks (READ_HASH_CHUNK in Sources/CDiskCacheSupport/read_hash.inc).
//
//   clang -O2 -march=native Benchmarks/c/read-hash-chunks.c -o /tmp/read-hash-chunks
//   cd "$(mktemp -d -p /var/tmp)" && /tmp/read-hash-chunks 4194304 300
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? (size_t)atol(argv[1]) : 4 << 20;
    int iterations = argc > 2 ? atoi(argv[2]) : 300;
    const char *path = "body";
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    unsigned char *bytes = malloc(size);
    if (fd < 0 || !bytes) return 1;
    for (size_t i = 0; i < size; i++) bytes[i] = (unsigned char)rand();
    if (write(fd, bytes, size) != (ssize_t)size) return 1;
    close(fd);
    free(bytes);
    const size_t chunks[] = {0, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20};
    unsigned long long sink = 0;
    for (int round = 0; round < 3; round++) {
        for (int way = 0; way < 7; way++) {
            size_t chunk = chunks[way];
            double start = now();
            for (int i = 0; i < iterations; i++) {
                int file = open(path, O_RDONLY);
                unsigned char *buffer = malloc(size);
                if (file < 0 || !buffer) return 1;
                if (chunk == 0) {
                    if (pread(file, buffer, size, 0) != (ssize_t)size) return 2;
                } else {
                    XXH3_state_t state;
                    XXH3_64bits_reset(&state);
                    for (size_t done = 0; done < size;) {
                        size_t want = size - done < chunk ? size - done : chunk;
                        ssize_t got = pread(file, buffer + done, want, (off_t)done);
                        if (got <= 0) return 2;
                        XXH3_64bits_update(&state, buffer + done, (size_t)got);
                        done += (size_t)got;
                    }
                    sink ^= XXH3_64bits_digest(&state);
                }
                sink ^= buffer[size - 1];
                free(buffer);
                close(file);
            }
            double micros = (now() - start) / iterations * 1e6;
            if (chunk == 0) printf("round %d, pread alone               %7.1f µs a read\n", round + 1, micros);
            else printf("round %d, hashed in %4zu KiB chunks     %7.1f µs a read\n", round + 1, chunk >> 10, micros);
        }
    }
    unlink(path);
    return (int)(sink & 0);
}
