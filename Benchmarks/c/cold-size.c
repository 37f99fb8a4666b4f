// What one more block costs a cold read, in plain C: two trees of FILES files in 256 shard
// directories, one of SIZE_A bytes a file and one of SIZE_B (e.g. a 4 KiB body alone, and with
// the ~250 bytes of metadata the store keeps beside it), then four rounds of: drop the page
// cache (as root), read each file of one tree once in a random order (open, one pread of the
// whole file, close) for at most GETS files, the same for the other tree. Prints each round's
// rate and what the device read per get (/sys/dev/block/<major>:<minor>/stat).
//
//   cc -O2 Benchmarks/c/cold-size.c -o /tmp/cold-size
//   cd /var/tmp && /tmp/cold-size "$(mktemp -d -p .)" 4096 4341 8192 4000   # or 65536 65816
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static char device_stat[256];

// Read requests and bytes the device holding the trees has completed.
static void device_reads(long long *requests, long long *bytes) {
    FILE *f = fopen(device_stat, "r");
    long long reads = 0, merged = 0, sectors = 0;
    if (f) {
        if (fscanf(f, "%lld %lld %lld", &reads, &merged, &sectors) != 3) reads = sectors = 0;
        fclose(f);
    }
    *requests = reads;
    *bytes = sectors * 512;
}

static void drop_caches(void) {
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd < 0 || write(fd, "3\n", 2) != 2) {
        fprintf(stderr, "cannot drop the page cache (run as root)\n");
        exit(1);
    }
    close(fd);
}

static void path(char *out, const char *root, char tree, int i) {
    sprintf(out, "%s/%c/%02x/%08x", root, tree, (unsigned)(i * 2654435761u) >> 24, i);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s DIR SIZE_A SIZE_B FILES GETS\n", argv[0]);
        return 2;
    }
    const char *root = argv[1];
    int sizes[2] = {atoi(argv[2]), atoi(argv[3])}, files = atoi(argv[4]), gets = atoi(argv[5]);
    if (gets > files) gets = files;
    struct stat info;
    if (stat(root, &info) != 0) { perror(root); return 1; }
    snprintf(device_stat, sizeof device_stat, "/sys/dev/block/%u:%u/stat", major(info.st_dev), minor(info.st_dev));
    if (access(device_stat, R_OK) != 0) fprintf(stderr, "no %s: the KiB and requests columns read 0\n", device_stat);
    int largest = sizes[0] > sizes[1] ? sizes[0] : sizes[1];
    char *buffer = malloc(largest + 1), name[4096];
    for (int i = 0; i < largest; i++) buffer[i] = (char)rand();
    for (int t = 0; t < 2; t++) {
        sprintf(name, "%s/%c", root, 'a' + t);
        mkdir(name, 0700);
        for (int s = 0; s < 256; s++) {
            sprintf(name, "%s/%c/%02x", root, 'a' + t, s);
            mkdir(name, 0700);
        }
    }
    // Both trees filled together, as the benchmark fills its subjects in turns.
    for (int i = 0; i < files; i++) {
        for (int t = 0; t < 2; t++) {
            path(name, root, 'a' + t, i);
            int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0600);
            if (fd < 0 || write(fd, buffer, sizes[t]) != sizes[t]) { perror(name); return 1; }
            close(fd);
        }
    }
    int *order = malloc(sizeof(int) * files);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < files; i++) order[i] = i;
        srand(round + 1);
        for (int i = files - 1; i > 0; i--) {
            int j = rand() % (i + 1), k = order[i];
            order[i] = order[j];
            order[j] = k;
        }
        for (int position = 0; position < 2; position++) {
            int t = (position + round) % 2;
            drop_caches();
            long long requests0, bytes0, requests1, bytes1;
            device_reads(&requests0, &bytes0);
            double start = now();
            for (int g = 0; g < gets; g++) {
                path(name, root, 'a' + t, order[g]);
                int fd = open(name, O_RDONLY);
                if (fd < 0 || pread(fd, buffer, largest + 1, 0) != sizes[t]) { perror(name); return 1; }
                close(fd);
            }
            double seconds = now() - start;
            device_reads(&requests1, &bytes1);
            printf("round %d  %7d B  %6.0f gets/s  %5.1f KiB  %4.2f requests a get\n", round, sizes[t], gets / seconds,
                   (bytes1 - bytes0) / 1024.0 / gets, (double)(requests1 - requests0) / gets);
        }
    }
    return 0;
}
