#ifndef CDISKCACHESUPPORT_H
#define CDISKCACHESUPPORT_H

#include <sys/types.h>

/// Reserves `length` bytes of disk blocks for `fd` starting at `offset` without
/// changing the file's size (Linux `fallocate(FALLOC_FL_KEEP_SIZE)`), so that
/// later writes into that range cannot fail with ENOSPC.
/// Returns 0 on success, -1 with errno set otherwise (ENOSYS/EOPNOTSUPP where
/// the platform or filesystem cannot do it).
int cdiskcache_reserve(int fd, off_t offset, off_t length);

/// Flushes every dirty page of the filesystem that holds `fd` (Linux `syncfs`), the
/// one call that makes a whole interval's writes durable together. Elsewhere it falls
/// back to `fsync(fd)` and returns 1 to say only `fd` was synced.
int cdiskcache_syncfs(int fd);

#endif
