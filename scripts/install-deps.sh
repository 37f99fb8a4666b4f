#!/usr/bin/env bash
# Installs what building swift-disk-cache needs beyond the Swift toolchain: libxxhash-dev.
# Safe to run again: it installs only what is missing (with sudo when not root).
set -euo pipefail

if [ -f /usr/include/xxhash.h ] || pkg-config --exists libxxhash 2>/dev/null; then
    exit 0
fi
if [ "$(uname -s)" = "Darwin" ]; then
    echo "Installing xxhash with Homebrew..." >&2
    brew install xxhash
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: libxxhash is missing and this system has no apt-get; install xxHash's development files (xxhash.h and libxxhash)" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "Installing libxxhash-dev..." >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libxxhash-dev pkg-config >/dev/null
