// Hashing a body file through a mapping of it (see CDiskCacheSupport.h): the bytes are read
// once, straight from the page cache, where `pread` copies them into a buffer first.
#define _GNU_SOURCE
#include "CDiskCacheSupport.h"
#include <errno.h>
#include <pthread.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// The jump out of a hash interrupted by SIGBUS, set only while this thread hashes a mapping.
static _Thread_local sigjmp_buf *bus_jump;
static struct sigaction previous_bus;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;
static void install_bus_handler(void);

// The shared pages guarded against their file being cut short (cdiskcache_guard_shared_mapping):
// a slot is free while its base is 0; size and fd are written before the base is published.
#define GUARDED_SLOTS 64
static struct {
    _Atomic(uintptr_t) base;
    size_t size;
    int fd;
} guarded[GUARDED_SLOTS];
// The address of this thread's last fault in a guarded page that growing the file did not cure.
static _Thread_local uintptr_t last_guarded_fault;

// Makes the guarded mapping holding `address`, if any, readable again; 1 when it did.
// Only async-signal-safe calls (fstat, ftruncate, mmap).
static int mend_guarded(uintptr_t address) {
    for (int i = 0; i < GUARDED_SLOTS; i++) {
        uintptr_t base = atomic_load(&guarded[i].base);
        if (base == 0 || address < base || address >= base + guarded[i].size) continue;
        size_t size = guarded[i].size;
        struct stat info;
        if (last_guarded_fault != address && fstat(guarded[i].fd, &info) == 0) {
            // Grown back (by this thread or another process) unless that already failed here.
            if (info.st_size >= (off_t)size || ftruncate(guarded[i].fd, (off_t)size) == 0) {
                last_guarded_fault = address;
                return 1;
            }
        }
        // The file cannot be grown (or faults even so): zeroed memory of this process's own.
        last_guarded_fault = 0;
        mmap((void *)base, size, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return 1;
    }
    return 0;
}

int cdiskcache_guard_shared_mapping(void *base, size_t size, int fd) {
    pthread_once(&bus_once, install_bus_handler);
    for (int i = 0; i < GUARDED_SLOTS; i++) {
        if (atomic_load(&guarded[i].base) != 0) continue;
        uintptr_t expected = 0;
        // Claimed with a placeholder that matches no address, then published.
        if (!atomic_compare_exchange_strong(&guarded[i].base, &expected, UINTPTR_MAX)) continue;
        guarded[i].size = size;
        guarded[i].fd = fd;
        atomic_store(&guarded[i].base, (uintptr_t)base);
        return 0;
    }
    errno = ENOMEM;
    return -1;
}

void cdiskcache_unguard_shared_mapping(void *base) {
    for (int i = 0; i < GUARDED_SLOTS; i++) {
        if (atomic_load(&guarded[i].base) == (uintptr_t)base) atomic_store(&guarded[i].base, 0);
    }
}

static void on_bus(int signal, siginfo_t *info, void *context) {
    if (info->si_code > 0 && mend_guarded((uintptr_t)info->si_addr)) return;
    sigjmp_buf *jump = bus_jump;
    if (jump && info->si_code > 0) {
        bus_jump = NULL;
        siglongjmp(*jump, 1);
    }
    if (info->si_code > 0) {
        // A fault, but not in a mapped body's hash: the handler installed before this one (or
        // the default, which ends the process) gets it when the faulting instruction runs again.
        sigaction(SIGBUS, &previous_bus, NULL);
        return;
    }
    // Sent by a process (kill, sigqueue): passed on to the handler before this one.
    if (previous_bus.sa_flags & SA_SIGINFO) {
        if (previous_bus.sa_sigaction) previous_bus.sa_sigaction(signal, info, context);
    } else if (previous_bus.sa_handler == SIG_DFL) {
        sigaction(SIGBUS, &previous_bus, NULL);
        raise(signal);
    } else if (previous_bus.sa_handler != SIG_IGN) {
        previous_bus.sa_handler(signal);
    }
}

static void install_bus_handler(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_bus;
    // SA_NODEFER: the jump out of the handler leaves SIGBUS unblocked for the next fault.
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous_bus);
}

// 1 when every page of [bytes, bytes + count) is in the page cache (`bytes` page-aligned).
static int resident(const void *bytes, size_t count) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char vector[1024];
    for (size_t done = 0; done < count;) {
        size_t span = count - done < sizeof vector * page ? count - done : sizeof vector * page;
        if (mincore((char *)bytes + done, span, vector) != 0) return 0;
        size_t pages = (span + page - 1) / page;
        for (size_t i = 0; i < pages; i++) if (!(vector[i] & 1)) return 0;
        done += span;
    }
    return 1;
}

int cdiskcache_hash_mapped(const void *bytes, size_t count, uint64_t *hash, int without_waiting) {
    if (without_waiting && !resident(bytes, count)) {
        errno = EAGAIN;
        return -1;
    }
    pthread_once(&bus_once, install_bus_handler);
    // Volatile: read after a jump back here.
    volatile uint64_t result = 0;
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0) != 0) {
        errno = EFAULT;
        return -1;
    }
    bus_jump = &jump;
    result = cdiskcache_xxh3_64(bytes, count);
    bus_jump = NULL;
    *hash = result;
    return 0;
}

int cdiskcache_copy_hash_mapped(const void *bytes, size_t count, void *destination, uint64_t *hash, int without_waiting) {
    if (without_waiting && !resident(bytes, count)) {
        errno = EAGAIN;
        return -1;
    }
    void *state = cdiskcache_xxh3_state_create();
    if (state == NULL) {
        errno = ENOMEM;
        return -1;
    }
    pthread_once(&bus_once, install_bus_handler);
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0) != 0) {
        cdiskcache_xxh3_state_free(state);
        errno = EFAULT;
        return -1;
    }
    bus_jump = &jump;
    // A piece at a time, small enough that the copy is still in the core's cache when the hash
    // reads it: the hash is of the bytes copied, whatever happens to the file meanwhile.
    const size_t piece = 32 << 10;
    for (size_t done = 0; done < count; done += piece) {
        size_t length = count - done < piece ? count - done : piece;
        memcpy((char *)destination + done, (const char *)bytes + done, length);
        cdiskcache_xxh3_update(state, (const char *)destination + done, length);
    }
    bus_jump = NULL;
    *hash = cdiskcache_xxh3_digest(state);
    cdiskcache_xxh3_state_free(state);
    return 0;
}

// Bytes of copies allocated and not yet freed, in the whole process (malloc's usable sizes).
static _Atomic size_t copies_in_flight;

void *cdiskcache_copy_allocate(size_t size, size_t budget) {
    void *bytes = malloc(size == 0 ? 1 : size);
    if (bytes == NULL) return NULL;
    size_t usable = malloc_usable_size(bytes);
    size_t before = atomic_fetch_add(&copies_in_flight, usable);
    if (before + usable > budget || before + usable < before) {
        atomic_fetch_sub(&copies_in_flight, usable);
        free(bytes);
        return NULL;
    }
    return bytes;
}

void *cdiskcache_copy_reallocate(void *bytes, size_t size) {
    size_t old = bytes ? malloc_usable_size(bytes) : 0;
    void *moved = realloc(bytes, size == 0 ? 1 : size);
    if (moved == NULL) return NULL;
    atomic_fetch_sub(&copies_in_flight, old);
    atomic_fetch_add(&copies_in_flight, malloc_usable_size(moved));
    return moved;
}

void cdiskcache_copy_free(void *bytes) {
    if (bytes == NULL) return;
    atomic_fetch_sub(&copies_in_flight, malloc_usable_size(bytes));
    free(bytes);
}

size_t cdiskcache_copies_in_flight(void) {
    return atomic_load(&copies_in_flight);
}
