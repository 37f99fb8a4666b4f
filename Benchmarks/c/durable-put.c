// What a durable put of one small value can cost on this disk, in plain C: the shape of the
// store's `.immediate` put against cheaper ways to make the same value survive a power cut.
// Five ways, each PUTS puts of SIZE bytes into a fresh directory (256 shard directories made and
// synced first), three interleaved rounds; prints puts/s and µs per put:
//
//   files      the value's file written and fsynced, its shard directory fsynced, a 74-byte
//              record appended to a journal and the journal fsynced (the store's `.immediate`)
//   syncfs     the value's file written, the record appended, one syncfs for all of it
//   value-log  the value's file written without a sync, the record and the value appended to
//              the journal, fdatasync of the journal (a write-ahead log holding values)
//   log-append no file: record and value appended to a log, fdatasync
//   log-place  no file: record and value written in place into a log made full-size (and
//              synced) beforehand, fdatasync (the shape of SQLite's WAL with synchronous=FULL)
//
//   clang -O2 Benchmarks/c/durable-put.c -o /tmp/durable-put
//   /tmp/durable-put /var/tmp/durable-put-scratch   # a directory on the disk to measure
//
// Figures swing with the file system's recent deletions (see docs/benchmarks.md, "Noise"):
// compare the ways within one run.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { PUTS = 1000, SIZE = 1024, RECORD = 74, ROUNDS = 3, WAYS = 5 };
static const char *names[WAYS] = { "files", "syncfs", "value-log", "log-append", "log-place" };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(int ok, const char *what) {
    if (!ok) { perror(what); exit(1); }
}

/// One way's PUTS puts into `root` (made fresh); returns the seconds they took.
static double run(const char *root, int way) {
    char path[512];
    static char value[SIZE + RECORD];
    memset(value, 'v', sizeof value);
    check(mkdir(root, 0700) == 0, "mkdir");
    int dir = open(root, O_RDONLY | O_DIRECTORY);
    int shards[256];
    for (int i = 0; i < 256; i++) {
        snprintf(path, sizeof path, "%02x", i);
        check(mkdirat(dir, path, 0700) == 0, "mkdir shard");
        shards[i] = openat(dir, path, O_RDONLY | O_DIRECTORY);
    }
    int log = openat(dir, "journal", O_RDWR | O_CREAT | (way == 4 ? 0 : O_APPEND), 0600);
    if (way == 4) check(ftruncate(log, (off_t)PUTS * (SIZE + RECORD)) == 0, "ftruncate");
    fsync(log);
    for (int i = 0; i < 256; i++) fsync(shards[i]);
    fsync(dir);
    sync();
    double start = now();
    for (int i = 0; i < PUTS; i++) {
        int shard = (i * 7919) & 255;
        if (way <= 2) {
            snprintf(path, sizeof path, "%08x%08x.meta", (unsigned)(i * 2654435761u), (unsigned)i);
            int fd = openat(shards[shard], path, O_WRONLY | O_CREAT | O_EXCL, 0600);
            check(fd >= 0 && write(fd, value, SIZE) == SIZE, "write file");
            if (way == 0) {
                check(fsync(fd) == 0 && fsync(shards[shard]) == 0, "fsync file");
                check(write(log, value, RECORD) == RECORD && fsync(log) == 0, "journal");
            } else if (way == 1) {
                check(write(log, value, RECORD) == RECORD && syncfs(log) == 0, "syncfs");
            } else {
                check(write(log, value, SIZE + RECORD) == SIZE + RECORD && fdatasync(log) == 0, "log");
            }
            close(fd);
        } else if (way == 3) {
            check(write(log, value, SIZE + RECORD) == SIZE + RECORD && fdatasync(log) == 0, "log");
        } else {
            off_t at = (off_t)i * (SIZE + RECORD);
            check(pwrite(log, value, SIZE + RECORD, at) == SIZE + RECORD && fdatasync(log) == 0, "log");
        }
    }
    double seconds = now() - start;
    for (int i = 0; i < 256; i++) close(shards[i]);
    close(log);
    close(dir);
    return seconds;
}

int main(int argc, char **argv) {
    const char *base = argc > 1 ? argv[1] : "durable-put-scratch";
    mkdir(base, 0700);
    char root[512], command[600];
    printf("%d puts of %d bytes per way and round\n", PUTS, SIZE);
    for (int round = 1; round <= ROUNDS; round++) {
        for (int way = 0; way < WAYS; way++) {
            snprintf(root, sizeof root, "%s/r%d-w%d", base, round, way);
            double seconds = run(root, way);
            printf("round %d %-10s %7.0f puts/s %7.1f us/put\n", round, names[way], PUTS / seconds, seconds / PUTS * 1e6);
            fflush(stdout);
        }
    }
    snprintf(command, sizeof command, "rm -rf '%s'", base);
    return system(command) == 0 ? 0 : 1;
}
