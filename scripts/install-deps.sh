#!/usr/bin/env bash
# Installs what building swift-disk-cache needs beyond the Swift toolchain: xxHash (the store's
# key hash), SQLite (the peer `diskcache bench` measures beside the store) and pkg-config (how
# SwiftPM finds both). Safe to run again: it checks first and installs only what is missing,
# with apt-get (through sudo when not root), or Homebrew on macOS.
set -euo pipefail

has_header() { # header pkg-config-name
    [ -f "/usr/include/$1" ] || { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$2"; }
}

missing=()
has_header xxhash.h libxxhash || missing+=(libxxhash-dev)
has_header sqlite3.h sqlite3 || missing+=(libsqlite3-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(uname -s)" = "Darwin" ]; then
    # SQLite comes with the SDK; xxHash and pkg-config from Homebrew.
    formulas=()
    for package in "${missing[@]}"; do
        case "$package" in
            libxxhash-dev) formulas+=(xxhash) ;;
            pkg-config) formulas+=(pkg-config) ;;
        esac
    done
    if [ ${#formulas[@]} -gt 0 ]; then
        echo "Installing ${formulas[*]} with Homebrew..." >&2
        brew install "${formulas[@]}"
    fi
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: missing ${missing[*]} (Debian names) and this system has no apt-get; install the development files of xxHash and SQLite, and pkg-config" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "Installing ${missing[*]}..." >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
