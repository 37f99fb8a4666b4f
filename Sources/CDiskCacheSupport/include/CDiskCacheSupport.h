#ifndef CDISKCACHESUPPORT_H
#define CDISKCACHESUPPORT_H

#include <stddef.h>
#include <stdint.h>
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

/// XXH3-64 of `count` bytes (the same value as libxxhash's `XXH3_64bits`), computed with
/// AVX2 where the CPU has it: about twice the speed of the distribution's SSE2 build.
uint64_t cdiskcache_xxh3_64(const void *bytes, size_t count);

/// XXH3-64 computed by xxHash's portable code, without vector instructions: the reference
/// the tests hold every vector path of `cdiskcache_xxh3_64` to.
uint64_t cdiskcache_xxh3_64_scalar(const void *bytes, size_t count);

/// XXH3-128 of `count` bytes (libxxhash's `XXH3_128bits`): the key hash.
void cdiskcache_xxh3_128(const void *bytes, size_t count, uint64_t *high, uint64_t *low);

/// Reads up to `count` bytes of `fd` from offset 0 into `buffer` (retrying EINTR, stopping
/// at end of file) and sets `*hash` to the XXH3-64 of the bytes read, hashing each chunk
/// right after it is read. Returns the number of bytes read, or -1 with errno set.
/// `without_waiting`: read with `cdiskcache_pread_entry`'s, failing with EAGAIN rather than
/// wait for the disk.
ssize_t cdiskcache_read_hashing(int fd, void *buffer, size_t count, uint64_t *hash, int without_waiting);

/// Sets `*hash` to the XXH3-64 of up to `count` bytes of `fd` from `offset` (retrying EINTR,
/// stopping at end of file), read through a 64 KiB buffer on the stack. Returns the number of
/// bytes hashed, or -1 with errno set. `without_waiting` as for `cdiskcache_read_hashing`.
ssize_t cdiskcache_hash_file(int fd, off_t offset, size_t count, uint64_t *hash, int without_waiting);

/// Sets `*hash` to the XXH3-64 of `count` bytes at `bytes`, a read-only shared mapping of a
/// file (page-aligned), and returns 0. Returns -1 with errno EFAULT when a page of it is
/// beyond the file's end (the file was cut short after it was mapped: the SIGBUS that touching
/// such a page raises is caught for this thread while it hashes, and ends the hash instead of
/// the process; a handler installed before the first call gets every other SIGBUS), or, with
/// `without_waiting`, EAGAIN when a page is not in the page cache (`mincore`): touching it
/// would wait for the disk.
int cdiskcache_hash_mapped(const void *bytes, size_t count, uint64_t *hash, int without_waiting);

/// `cdiskcache_hash_mapped`, copying the bytes to `destination` (`count` bytes, not
/// overlapping) a piece at a time as it goes: `*hash` is the XXH3-64 of the bytes copied (read
/// from `destination` just after each piece is copied), so that what the copy holds is what was
/// hashed, whatever another process does to the file. The same errors; `destination`'s bytes
/// are then undefined. ENOMEM when the hash's state cannot be allocated.
int cdiskcache_copy_hash_mapped(const void *bytes, size_t count, void *destination, uint64_t *hash,
                                int without_waiting);

/// Memory for copies of bodies, counted process-wide while allocated: `malloc(size)`, or NULL
/// when that would take the bytes allocated this way past `budget` (or malloc fails).
/// `cdiskcache_copy_reallocate` is `realloc`, counted; `cdiskcache_copy_free` frees such memory
/// (NULL is ignored). `cdiskcache_copies_in_flight` is the bytes allocated and not yet freed.
void *cdiskcache_copy_allocate(size_t size, size_t budget);
void *cdiskcache_copy_reallocate(void *bytes, size_t size);
void cdiskcache_copy_free(void *bytes);
size_t cdiskcache_copies_in_flight(void);

/// `pread`, or with `without_waiting` (a read that must not wait for the disk: an event loop
/// answering from the page cache) Linux `preadv2` with `RWF_NOWAIT`: -1 with errno EAGAIN when
/// the bytes are not all in the page cache, or the system cannot tell (no `preadv2`, a
/// filesystem without `RWF_NOWAIT`). It may return fewer bytes than asked for, as `pread` may.
ssize_t cdiskcache_pread_entry(int fd, void *buffer, size_t count, off_t offset, int without_waiting);

/// Opens `path`, relative to the directory `directory`, without following a symbolic link at
/// any component and without leaving that directory (Linux `openat2` with
/// `RESOLVE_NO_SYMLINKS`, and `RESOLVE_BENEATH` too when the path is absolute or contains
/// "..": without links, only those can leave the directory). Where `openat2` is missing (Linux before 5.6, a
/// seccomp filter that refuses it, other systems) the path is walked one component at a time
/// with `openat(O_NOFOLLOW | O_DIRECTORY)`. A link anywhere fails with ELOOP (or ENOTDIR),
/// an absolute path or a ".." component with EXDEV. `O_CLOEXEC` is always added. Returns the
/// descriptor, or -1 with errno set.
int cdiskcache_open_beneath(int directory, const char *path, int flags, mode_t mode);

/// An XXH3-64 computed piece by piece (libxxhash's streaming state, allocated aligned), for a
/// body that arrives in chunks. `update` uses the widest vector unit this CPU has, as
/// `cdiskcache_xxh3_64` does; the digest equals `XXH3_64bits` of the concatenated pieces.
/// `create` returns NULL when out of memory.
void *cdiskcache_xxh3_state_create(void);
void cdiskcache_xxh3_state_free(void *state);
void cdiskcache_xxh3_update(void *state, const void *bytes, size_t count);
uint64_t cdiskcache_xxh3_digest(const void *state);

/// Makes `destination` share `source`'s blocks (Linux `ioctl(FICLONE)`, a reflink on btrfs,
/// XFS and others; no bytes are copied). Returns 0, or -1 with errno set (EOPNOTSUPP, EXDEV,
/// EINVAL, ENOTTY where the filesystem or the pair cannot do it).
int cdiskcache_clone(int destination, int source);

/// Copies up to `count` bytes from `source` at `*source_offset` to `destination` at
/// `*destination_offset` inside the kernel (Linux `copy_file_range`), advancing both offsets.
/// Returns the number of bytes copied (0 at the source's end), or -1 with errno set (ENOSYS,
/// EXDEV, EINVAL, EOPNOTSUPP where it cannot be used).
ssize_t cdiskcache_copy_range(int source, int64_t *source_offset, int destination, int64_t *destination_offset, size_t count);

/// Locks bytes [start, start + length) of `fd` for the open file description (Linux
/// `F_OFD_SETLK`/`F_OFD_SETLKW`: two descriptors opened separately conflict even in one
/// process, and closing any descriptor of another description releases nothing of this one).
/// `kind` is 0 to unlock, 1 for a shared lock, 2 for an exclusive one; a held lock of this
/// description on the range is converted atomically. With `wait` 0 a conflicting lock fails
/// at once with EAGAIN; otherwise the call waits (EINTR is retried). Where OFD locks are
/// missing, the process's own `fcntl` locks are used. Returns 0, or -1 with errno set.
int cdiskcache_range_lock(int fd, int64_t start, int64_t length, int kind, int wait);
/// Whether another open file description holds a lock on the range that conflicts with `kind`
/// (1 shared, 2 exclusive): 1 if one does, 0 if not, -1 with errno set on failure. Takes no
/// lock (F_OFD_GETLK, so a descriptor open only for reading will do).
int cdiskcache_range_test(int fd, int64_t start, int64_t length, int kind);

/// The filesystem type of `path` (Linux `statfs(2)`'s `f_type`, e.g. 0x6969 for NFS), or -1
/// with errno set. Elsewhere -1 with ENOSYS.
int64_t cdiskcache_filesystem_type(const char *path);

/// Sequentially consistent 64-bit load and store on memory shared between processes (a
/// `MAP_SHARED` mapping), and a fetch-and-add that returns the new value.
/// Process-shared, robust mutexes living in a page several processes map (`MAP_SHARED`):
/// uncontended, locking and unlocking make no system call, and one whose holder died (even by
/// `kill -9`) is handed to the next locker, which is told so.
/// `init` returns 0 or an errno (ENOTSUP where robust mutexes do not exist); `lock` returns 0,
/// 1 when the previous holder died holding it (it is made consistent and now held), or an errno.
int cdiskcache_shared_mutex_init(void *address);
int cdiskcache_shared_mutex_lock(void *address);
int cdiskcache_shared_mutex_unlock(void *address);
/// pthread_mutex_trylock of such a mutex: 0 when taken, 1 when taken from a holder that died
/// (made consistent), EBUSY when another holds it, or another errno.
int cdiskcache_shared_mutex_trylock(void *address);
/// Bytes one mutex takes (at most 64 where they are supported).
int cdiskcache_shared_mutex_size(void);
/// `cdiskcache_shared_mutex_lock` waiting at most `timeout_ns` nanoseconds (a `trylock` first,
/// so the uncontended case reads no clock): 0, 1 as there, ETIMEDOUT when the wait ran out,
/// EINVAL when the mutex's words say it is held by a thread they do not agree on (written
/// over from outside: checked every 50 ms of the wait, two checks in a row), or another errno.
int cdiskcache_shared_mutex_timedlock(void *address, int64_t timeout_ns);
/// 1 when the memory at `address` still holds a mutex `cdiskcache_shared_mutex_init` made (its
/// type word is a process-shared robust mutex's: zeros or garbage written over it are not), 0
/// otherwise. A check of one word (glibc's `__kind`); elsewhere always 1.
int cdiskcache_shared_mutex_is_valid(const void *address);

/// `cdiskcache_range_lock` with a bounded wait: tries without waiting, then again after
/// sleeps of growing length (50 us up to 2 ms) until `timeout_ns` nanoseconds have passed,
/// and then fails with ETIMEDOUT. Returns 0, or -1 with errno set.
int cdiskcache_range_lock_timed(int fd, int64_t start, int64_t length, int kind, int64_t timeout_ns);

/// Nanoseconds of `CLOCK_MONOTONIC` (read through the vDSO: no system call).
uint64_t cdiskcache_monotonic_nanoseconds(void);

/// Guards a `MAP_SHARED` mapping of `size` bytes at `base` of the file open at `fd` against the
/// file being cut short under it: a SIGBUS raised by touching it (a page past the file's new
/// end) is caught, the file is grown back to `size` (its lost pages read as zeros), or where
/// that fails the range is replaced by private zeroed memory, and the access goes on. The owner
/// of the mapping finds zeros where its fields were, which its validation reports. Returns 0,
/// or -1 with ENOMEM when every one of the 64 slots is taken (the mapping is then unguarded).
/// Shares the handler of `cdiskcache_hash_mapped`.
int cdiskcache_guard_shared_mapping(void *base, size_t size, int fd);
/// Stops guarding the mapping at `base` (before it is unmapped).
void cdiskcache_unguard_shared_mapping(void *base);

uint64_t cdiskcache_atomic_load(const uint64_t *address);
void cdiskcache_atomic_store(uint64_t *address, uint64_t value);
uint64_t cdiskcache_atomic_add(uint64_t *address, int64_t delta);

#endif
