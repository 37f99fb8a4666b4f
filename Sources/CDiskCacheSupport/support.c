#define _GNU_SOURCE
#include "CDiskCacheSupport.h"
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/uio.h>
#include <time.h>

ssize_t cdiskcache_pread_entry(int fd, void *buffer, size_t count, off_t offset, int without_waiting) {
    if (!without_waiting) return pread(fd, buffer, count, offset);
#if defined(__linux__) && defined(RWF_NOWAIT)
    struct iovec vector = { .iov_base = buffer, .iov_len = count };
    ssize_t got = preadv2(fd, &vector, 1, offset, RWF_NOWAIT);
    if (got >= 0 || (errno != EAGAIN && errno != EOPNOTSUPP && errno != ENOSYS)) return got;
#endif
    errno = EAGAIN;
    return -1;
}

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

#if defined(__linux__)
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif
#include <string.h>

/// 1 while openat2 may work, 0 once it reported ENOSYS (or EPERM from a seccomp filter).
static int openat2_usable = 1;

/// The component walk: every directory on the way is opened with O_NOFOLLOW | O_DIRECTORY,
/// which fails on a symbolic link; the last component with the caller's flags and O_NOFOLLOW.
static int open_walking(int directory, const char *path, int flags, mode_t mode) {
    if (path[0] == '/') { errno = EXDEV; return -1; }
    char component[256];
    int current = directory;
    const char *start = path;
    for (;;) {
        const char *slash = strchr(start, '/');
        size_t length = slash ? (size_t)(slash - start) : strlen(start);
        if (length == 0 || length >= sizeof component) {
            if (current != directory) close(current);
            errno = length == 0 ? ENOENT : ENAMETOOLONG;
            return -1;
        }
        memcpy(component, start, length);
        component[length] = 0;
        if (strcmp(component, "..") == 0) {
            if (current != directory) close(current);
            errno = EXDEV;
            return -1;
        }
        int next;
        if (slash == NULL) {
            next = openat(current, component, flags | O_NOFOLLOW | O_CLOEXEC, mode);
        } else {
            next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int saved = errno;
        if (current != directory) close(current);
        errno = saved;
        if (next < 0 || slash == NULL) return next;
        current = next;
        start = slash + 1;
    }
}

int cdiskcache_open_beneath(int directory, const char *path, int flags, mode_t mode) {
#if defined(__linux__) && defined(SYS_openat2)
    if (__atomic_load_n(&openat2_usable, __ATOMIC_RELAXED)) {
        struct open_how how;
        memset(&how, 0, sizeof how);
        how.flags = (unsigned long long)(flags | O_CLOEXEC);
        // O_TMPFILE includes O_DIRECTORY's bit: a mode given with a plain O_DIRECTORY is EINVAL.
        how.mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? mode : 0;
        // With no symbolic link followed, only a ".." component or an absolute path can leave
        // `directory`: RESOLVE_BENEATH is asked for only then. It costs about 0.2 us an open
        // (Benchmarks/c/open-cost.c: an open, pread and close of a cached 1 KiB file took
        // 2.56-2.69 us with it and 2.36-2.52 us without, three rounds), and every
        // entry a cache reads or writes is opened by a path such as "ab/<32 hex digits>.meta".
        // What it would add for such a path is a check, at the end of the lookup, that no
        // directory on the way was renamed out of `directory` meanwhile; a rename just after
        // the open has the same effect, and renaming in the cache directory takes write access
        // to it.
        how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
        if (path[0] == '/' || strstr(path, "..") != NULL) how.resolve |= RESOLVE_BENEATH;
        long fd = syscall(SYS_openat2, directory, path, &how, sizeof how);
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return (int)fd;
        if (errno == ENOSYS) __atomic_store_n(&openat2_usable, 0, __ATOMIC_RELAXED);
        // EPERM may be a seccomp filter or a real permission error: the walk tells which.
    }
#endif
    return open_walking(directory, path, flags, mode);
}

#if defined(__linux__)
#include <sys/ioctl.h>
#include <linux/fs.h>
#endif

int cdiskcache_clone(int destination, int source) {
#if defined(__linux__) && defined(FICLONE)
    return ioctl(destination, FICLONE, source);
#else
    (void)destination; (void)source;
    errno = EOPNOTSUPP;
    return -1;
#endif
}

ssize_t cdiskcache_copy_range(int source, int64_t *source_offset, int destination, int64_t *destination_offset, size_t count) {
#if defined(__linux__)
    loff_t in = (loff_t)*source_offset, out = (loff_t)*destination_offset;
    ssize_t copied = copy_file_range(source, &in, destination, &out, count, 0);
    if (copied > 0) {
        *source_offset = (int64_t)in;
        *destination_offset = (int64_t)out;
    }
    return copied;
#else
    (void)source; (void)source_offset; (void)destination; (void)destination_offset; (void)count;
    errno = ENOSYS;
    return -1;
#endif
}

int cdiskcache_range_lock(int fd, int64_t start, int64_t length, int kind, int wait) {
    struct flock lock;
    memset(&lock, 0, sizeof lock);
    lock.l_type = kind == 0 ? F_UNLCK : (kind == 1 ? F_RDLCK : F_WRLCK);
    lock.l_whence = SEEK_SET;
    lock.l_start = (off_t)start;
    lock.l_len = (off_t)length;
#if defined(F_OFD_SETLK)
    int command = wait ? F_OFD_SETLKW : F_OFD_SETLK;
#else
    int command = wait ? F_SETLKW : F_SETLK;
#endif
    for (;;) {
        int result = fcntl(fd, command, &lock);
        if (result == 0) return 0;
        if (errno == EINTR) continue;
        if (errno == EACCES) errno = EAGAIN;
        return -1;
    }
}

uint64_t cdiskcache_monotonic_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

int cdiskcache_range_lock_timed(int fd, int64_t start, int64_t length, int kind, int64_t timeout_ns) {
    if (cdiskcache_range_lock(fd, start, length, kind, 0) == 0) return 0;
    if (errno != EAGAIN && errno != ENOLCK) return -1;
    uint64_t deadline = cdiskcache_monotonic_nanoseconds() + (uint64_t)(timeout_ns > 0 ? timeout_ns : 0);
    // Polled, not F_OFD_SETLKW: a blocking wait cannot be bounded without a signal. Short
    // pauses, so that a waiter is not starved by a holder that takes the lock again and again.
    long pause = 50000;
    for (;;) {
        uint64_t now = cdiskcache_monotonic_nanoseconds();
        if (now >= deadline) {
            errno = ETIMEDOUT;
            return -1;
        }
        long left = (long)(deadline - now);
        struct timespec sleep = { .tv_sec = 0, .tv_nsec = pause < left ? pause : left };
        nanosleep(&sleep, NULL);
        if (pause < 2000000) pause *= 2;
        if (cdiskcache_range_lock(fd, start, length, kind, 0) == 0) return 0;
        if (errno != EAGAIN && errno != ENOLCK) return -1;
    }
}

int cdiskcache_range_test(int fd, int64_t start, int64_t length, int kind) {
    struct flock lock;
    memset(&lock, 0, sizeof lock);
    lock.l_type = kind == 1 ? F_RDLCK : F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = (off_t)start;
    lock.l_len = (off_t)length;
#if defined(F_OFD_GETLK)
    int command = F_OFD_GETLK;
#else
    int command = F_GETLK;
#endif
    for (;;) {
        if (fcntl(fd, command, &lock) == 0) return lock.l_type == F_UNLCK ? 0 : 1;
        if (errno != EINTR) return -1;
    }
}

uint64_t cdiskcache_atomic_load(const uint64_t *address) {
    return __atomic_load_n(address, __ATOMIC_SEQ_CST);
}

void cdiskcache_atomic_store(uint64_t *address, uint64_t value) {
    __atomic_store_n(address, value, __ATOMIC_SEQ_CST);
}

uint64_t cdiskcache_atomic_add(uint64_t *address, int64_t delta) {
    return __atomic_add_fetch(address, (uint64_t)delta, __ATOMIC_SEQ_CST);
}

#if defined(__linux__)
#include <sys/vfs.h>
#endif

int64_t cdiskcache_filesystem_type(const char *path) {
#if defined(__linux__)
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (int64_t)(uint32_t)info.f_type;
#else
    (void)path;
    errno = ENOSYS;
    return -1;
#endif
}

#if defined(__linux__)
int cdiskcache_shared_mutex_init(void *address) {
    pthread_mutexattr_t attributes;
    int result = pthread_mutexattr_init(&attributes);
    if (result != 0) return result;
    result = pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    if (result == 0) result = pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    if (result == 0) {
        memset(address, 0, sizeof(pthread_mutex_t));
        result = pthread_mutex_init((pthread_mutex_t *)address, &attributes);
    }
    pthread_mutexattr_destroy(&attributes);
    return result;
}

// What a lock or trylock of a robust mutex returned, as cdiskcache_shared_mutex_lock returns
// it: a mutex taken from a holder that died is made consistent and reported as 1.
static int shared_mutex_taken(pthread_mutex_t *mutex, int result) {
    if (result == EOWNERDEAD) {
        result = pthread_mutex_consistent(mutex);
        return result == 0 ? 1 : result;
    }
    return result;
}

int cdiskcache_shared_mutex_lock(void *address) {
    return shared_mutex_taken((pthread_mutex_t *)address, pthread_mutex_lock((pthread_mutex_t *)address));
}

int cdiskcache_shared_mutex_unlock(void *address) {
    return pthread_mutex_unlock((pthread_mutex_t *)address);
}

int cdiskcache_shared_mutex_trylock(void *address) {
    return shared_mutex_taken((pthread_mutex_t *)address, pthread_mutex_trylock((pthread_mutex_t *)address));
}

int cdiskcache_shared_mutex_size(void) {
    return (int)sizeof(pthread_mutex_t);
}

#if defined(__GLIBC__)
/// A held mutex names its holder twice: the thread id in the lock word (the futex) and in
/// `__owner`, which glibc writes right after taking the lock (and clears right before
/// releasing it). A lock word naming a thread `__owner` does not name, seen twice a pause apart,
/// was written by something other than a locker: a damaged page. (Both are the holder's thread
/// id in its own PID namespace, so this holds for processes in different containers too.)
static int holder_words_disagree(pthread_mutex_t *mutex) {
    int lock = __atomic_load_n(&mutex->__data.__lock, __ATOMIC_RELAXED) & 0x3fffffff;  // FUTEX_TID_MASK
    int owner = __atomic_load_n(&mutex->__data.__owner, __ATOMIC_RELAXED);
    return lock != 0 && lock != owner;
}
#endif

/// The wait is made in steps of at most this long, checking the holder's words between them.
static const int64_t holder_check_interval_ns = 50 * 1000000;

int cdiskcache_shared_mutex_timedlock(void *address, int64_t timeout_ns) {
    pthread_mutex_t *mutex = (pthread_mutex_t *)address;
    int result = pthread_mutex_trylock(mutex);
    if (result != EBUSY) return shared_mutex_taken(mutex, result);
#if defined(__GLIBC__)
    const clockid_t clock = CLOCK_MONOTONIC;
#else
    const clockid_t clock = CLOCK_REALTIME;
#endif
    struct timespec now;
    clock_gettime(clock, &now);
    const int64_t start = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    const int64_t end = start + (timeout_ns > 0 ? timeout_ns : 0);
    int disagreements = 0;
    for (int64_t step_end = start;;) {
        step_end = step_end + holder_check_interval_ns < end ? step_end + holder_check_interval_ns : end;
        struct timespec deadline = { .tv_sec = (time_t)(step_end / 1000000000), .tv_nsec = (long)(step_end % 1000000000) };
#if defined(__GLIBC__)
        result = pthread_mutex_clocklock(mutex, clock, &deadline);
#else
        result = pthread_mutex_timedlock(mutex, &deadline);
#endif
        if (result != ETIMEDOUT || step_end >= end) return shared_mutex_taken(mutex, result);
#if defined(__GLIBC__)
        disagreements = holder_words_disagree(mutex) ? disagreements + 1 : 0;
        if (disagreements >= 2) return EINVAL;
#endif
    }
}

#if defined(__GLIBC__)
// The type word of a mutex cdiskcache_shared_mutex_init makes, read from one made here.
static int expected_kind;
static pthread_once_t expected_kind_once = PTHREAD_ONCE_INIT;

static void find_expected_kind(void) {
    pthread_mutex_t mutex;
    if (cdiskcache_shared_mutex_init(&mutex) == 0) {
        expected_kind = mutex.__data.__kind;
        pthread_mutex_destroy(&mutex);
    } else {
        expected_kind = -1;
    }
}
#endif

int cdiskcache_shared_mutex_is_valid(const void *address) {
#if defined(__GLIBC__)
    pthread_once(&expected_kind_once, find_expected_kind);
    int kind = __atomic_load_n(&((const pthread_mutex_t *)address)->__data.__kind, __ATOMIC_RELAXED);
    return kind == expected_kind && expected_kind != -1;
#else
    (void)address;
    return 1;
#endif
}
#else
int cdiskcache_shared_mutex_init(void *address) { (void)address; return ENOTSUP; }
int cdiskcache_shared_mutex_lock(void *address) { (void)address; return ENOTSUP; }
int cdiskcache_shared_mutex_unlock(void *address) { (void)address; return ENOTSUP; }
int cdiskcache_shared_mutex_trylock(void *address) { (void)address; return ENOTSUP; }
int cdiskcache_shared_mutex_size(void) { return 0; }
int cdiskcache_shared_mutex_timedlock(void *address, int64_t timeout_ns) { (void)address; (void)timeout_ns; return ENOTSUP; }
int cdiskcache_shared_mutex_is_valid(const void *address) { (void)address; return 1; }
#endif
