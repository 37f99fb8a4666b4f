#!/usr/bin/env python3
"""How fast this filesystem creates small files, by the state of its inode tables.

Creates N files of 1 KiB (O_CREAT|O_EXCL, one write, close) in a new directory three times:
into a filesystem region nothing was recently deleted from, right after deleting N files,
and again after a synced delete and a pause longer than ext4's "recently deleted" window
(5 s, 10 s for dirty inode blocks). Prints creates/s for each. One file per entry stores are
bounded by these rates; SQLite and other single-file stores are not.

    Benchmarks/create-rate.py [DIR] [N]     (DIR: a new temporary directory by default)
"""
import os
import shutil
import sys
import tempfile
import time


def fill(directory, n):
    os.makedirs(directory)
    body = b"x" * 1024
    start = time.perf_counter()
    for i in range(n):
        fd = os.open(f"{directory}/{i:08x}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, body)
        os.close(fd)
    return n / (time.perf_counter() - start)


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="create-rate.", dir="/var/tmp")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    os.makedirs(base, exist_ok=True)
    try:
        os.sync()
        first = fill(f"{base}/a", n)
        shutil.rmtree(f"{base}/a")
        after_delete = fill(f"{base}/b", n)
        os.sync()
        shutil.rmtree(f"{base}/b")
        os.sync()
        time.sleep(12)
        later = fill(f"{base}/c", n)
        shutil.rmtree(f"{base}/c")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{n} creates of 1 KiB, creates/s: fresh {first:.0f}; right after deleting {n} files "
          f"{after_delete:.0f}; 12 s after a synced delete {later:.0f}")


if __name__ == "__main__":
    main()
