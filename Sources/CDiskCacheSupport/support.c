#define _GNU_SOURCE
#include "CDiskCacheSupport.h"
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int cdiskcache_reserve(int fd, off_t offset, off_t length) {
#if defined(__linux__)
    return fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length);
#else
    (void)fd; (void)offset; (void)length;
    errno = ENOSYS;
    return -1;
#endif
}

int cdiskcache_syncfs(int fd) {
#if defined(__linux__)
    return syncfs(fd);
#else
    int result = fsync(fd);
    return result == 0 ? 1 : result;
#endif
}
