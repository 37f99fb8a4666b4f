#!/usr/bin/env bash
# Builds the DocC documentation of the three library modules (DiskCache, MemoryCache,
# HTTPCache) with swift-docc-plugin, and fails on any DocC warning (a broken symbol link, an
# article no page reaches). The plugin is a dependency only while this script runs
# (DISKCACHE_DOCS=1, see Package.swift), in its own build folder, .build-docs.
#
#   scripts/docs.sh            # archives in .build-docs/archives/<Module>.doccarchive
#   scripts/docs.sh --preview  # also a static website per module in .build-docs/site/<Module>
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export DISKCACHE_DOCS=1
out=.build-docs/archives
mkdir -p "$out"
for module in DiskCache MemoryCache HTTPCache; do
    echo "Building the documentation of $module..." >&2
    swift package --scratch-path .build-docs --allow-writing-to-directory "$out" \
        generate-documentation --target "$module" --warnings-as-errors \
        --output-path "$out/$module.doccarchive"
    if [ "${1:-}" = "--preview" ]; then
        mkdir -p .build-docs/site
        swift package --scratch-path .build-docs --allow-writing-to-directory .build-docs/site \
            generate-documentation --target "$module" --warnings-as-errors \
            --transform-for-static-hosting --output-path ".build-docs/site/$module"
    fi
done
echo "Documentation: $out/{DiskCache,MemoryCache,HTTPCache}.doccarchive" >&2
