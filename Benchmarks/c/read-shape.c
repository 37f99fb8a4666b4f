// How much of a get's cost is the shape of the store's read, in plain C: 4,096 files of one
// body size in 256 shard directories, read at random, (a) as the floor does (open of the full
// path, pread of the body, close) and (b) as the store did before 3b46de9 (openat2 beneath the
// directory with RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH, which the store now keeps only for
// absolute paths or paths with '..': see open-cost.c; one pread of the whole file: HEADER bytes of metadata
// then the body, XXH3-64 of the body when HASH is 1, close). Three rounds, each both ways.
//
//   clang -O2 -mavx2 Benchmarks/c/read-shape.c -o /tmp/read-shape
//   cd "$(mktemp -d)" && /tmp/read-shape SIZE HEADER HASH    # e.g. 16384 150 1, then 16384 0 1
#define _GNU_SOURCE
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: read-shape SIZE HEADER HASH (run it in an empty scratch directory)\n");
        return 2;
    }
    const int files = 4096, reads = 200000;
    int size = atoi(argv[1]), header = atoi(argv[2]), hash = atoi(argv[3]);
    char *bytes = calloc(1, size + header);
    char path[512], cwd[256];
    if (!getcwd(cwd, sizeof cwd)) return 1;
    mkdir("store", 0700);
    mkdir("floor", 0700);
    for (int d = 0; d < 256; d++) {
        snprintf(path, sizeof path, "store/%02x", d); mkdir(path, 0700);
        snprintf(path, sizeof path, "floor/%02x", d); mkdir(path, 0700);
    }
    for (int i = 0; i < files; i++) {
        snprintf(path, sizeof path, "store/%02x/%032x.meta", i % 256, i * 7919);
        int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0600);
        if (fd < 0 || write(fd, bytes, size + header) != size + header) return 1;
        close(fd);
        snprintf(path, sizeof path, "floor/%02x/%032x", i % 256, i * 7919);
        fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0600);
        if (fd < 0 || write(fd, bytes, size) != size) return 1;
        close(fd);
    }
    int store = open("store", O_RDONLY | O_DIRECTORY);
    unsigned seed = 1;
    unsigned long long sink = 0;
    for (int round = 0; round < 3; round++) {
        double start = now();
        for (int k = 0; k < reads; k++) {
            int i = rand_r(&seed) % files;
            snprintf(path, sizeof path, "%s/floor/%02x/%032x", cwd, i % 256, i * 7919);
            int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            char *buffer = malloc(size);
            if (fd < 0 || pread(fd, buffer, size, 0) != size) return 1;
            close(fd);
            sink += buffer[size / 2];
            free(buffer);
        }
        double floor = now() - start;
        start = now();
        for (int k = 0; k < reads; k++) {
            int i = rand_r(&seed) % files;
            snprintf(path, sizeof path, "%02x/%032x.meta", i % 256, i * 7919);
            struct open_how how;
            memset(&how, 0, sizeof how);
            how.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
            how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
            int fd = (int)syscall(SYS_openat2, store, path, &how, sizeof how);
            char *buffer = malloc(size + header);
            if (fd < 0 || pread(fd, buffer, size + header, 0) != size + header) return 1;
            close(fd);
            sink += hash ? XXH3_64bits(buffer + header, size) : (unsigned long long)buffer[size / 2];
            free(buffer);
        }
        double shaped = now() - start;
        printf("size %d, header %d, hash %d: floor %.2f us, store-shaped %.2f us a read, ratio %.2f\n",
               size, header, hash, floor / reads * 1e6, shaped / reads * 1e6, floor / shaped);
    }
    return (int)(sink & 0);
}
