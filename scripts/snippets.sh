#!/usr/bin/env bash
# Compiles every Swift snippet of README.md and docs/*.md against the library as it is, so that
# what the documentation shows compiles as pasted into an app.
#
# Each block fenced with ```swift becomes the main.swift of an executable target of its own,
# named after its file and place there (README_1, integrations_2), in the Examples package: that
# package depends on this one by path with the Hummingbird, Vapor and AsyncHTTPClient traits on,
# so the build reuses what scripts/examples.sh built in Examples/.build (about a minute after
# it; the first build of Examples/.build takes half an hour on two cores). The sources are
# written under Examples/.build/snippets/, and the targets exist only while this script builds
# them (Examples/Package.swift reads their names from DISKCACHE_SNIPPETS). A target depends on
# the products of the modules its snippet imports and on no others, so a missing `import` fails
# here as it would in an app (Swift 6 language mode, no upcoming features); so does a warning (a
# deprecated call). Errors point at the Markdown file and line.
#
# Conventions, each an HTML comment on the line before a block's fence (blank lines between are
# fine), invisible where the Markdown is rendered:
# - `<!-- snippet: fragment -->`: not Swift to compile on its own (a Package.swift excerpt, a
#   whole manifest); skipped.
# - `<!-- snippet: continued -->`: the same program as the snippet before it in the file (its
#   imports and declarations in scope), as a reader takes it; appended to that one's main.swift.
# And a snippet may use, without declaring them, the few names that stand for an app's own
# values (`cacheDirectory`, `url`, `user`, ...): the scaffold below declares them, and each
# snippet imports it (a line the script adds). A snippet's own declarations take precedence.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
out=Examples/.build/snippets
rm -rf "$out"
mkdir -p "$out/SnippetScaffold" "$out/Snippets"

cat > "$out/SnippetScaffold/SnippetScaffold.swift" <<'EOF'
// What the snippets use without declaring it; never run (the snippets are only compiled).
public import Foundation

public struct User: Codable, Sendable {
    public var name: String
}

public struct Thumbnail: Sendable {
    public var byteCount: Int
}

public var cacheDirectory: URL { fatalError("never run") }
public var data: Data { fatalError("never run") }
public var downloadedFile: URL { fatalError("never run") }
public var file: FileHandle { fatalError("never run") }
public var key: String { fatalError("never run") }
public var piece: Data { fatalError("never run") }
public var thumbnail: Thumbnail { fatalError("never run") }
public var url: URL { fatalError("never run") }
public var user: User { fatalError("never run") }
public func send(_ chunk: Data) {}
public func serve(_ url: URL, _ fileDescriptor: Int32) {}
EOF

# One line per snippet: `name:Module,Module` (the modules it imports).
specs=$(awk -v out="$out" -v root="$PWD" '
    function finish() {
        if (pending) { close(file); print name ":" imports; pending = 0 }
    }
    FNR == 1 { finish(); inside = 0; previous = ""; count = 0 }
    !inside && /^```swift[[:space:]]*$/ {
        inside = 1
        skip = (previous == "<!-- snippet: fragment -->")
        continued = (previous == "<!-- snippet: continued -->")
        if (continued && !pending) {
            printf "%s:%d: a continued snippet follows no snippet\n", FILENAME, FNR > "/dev/stderr"
            exit 1
        }
        if (!skip && !continued) {
            finish()
            name = FILENAME
            sub(/^.*\//, "", name); sub(/\.md$/, "", name); gsub(/[^A-Za-z0-9]/, "_", name)
            name = name "_" ++count
            system("mkdir -p " out "/" name)
            file = out "/" name "/main.swift"
            imports = ""
            print "import SnippetScaffold" > file
        }
        if (!skip) printf "#sourceLocation(file: \"%s/%s\", line: %d)\n", root, FILENAME, FNR + 1 > file
        next
    }
    inside && /^```[[:space:]]*$/ {
        inside = 0
        previous = ""
        if (!skip) { print "#sourceLocation()" > file; pending = 1 }
        next
    }
    inside {
        if (!skip) {
            print > file
            if ($0 ~ /^[[:space:]]*(@_exported[[:space:]]+)?((public|package|internal)[[:space:]]+)?import[[:space:]]/) {
                module = $0
                sub(/^.*import[[:space:]]+/, "", module)
                sub(/[^A-Za-z0-9_].*$/, "", module)
                imports = imports (imports == "" ? "" : ",") module
            }
        }
        next
    }
    !/^[[:space:]]*$/ { previous = $0 }
    END { finish() }
' README.md docs/*.md)
[ -n "$specs" ] || { echo "no Swift snippets found" >&2; exit 1; }
# The target that depends on them all, built in one invocation.
echo "// Depends on every snippet's target." > "$out/Snippets/Snippets.swift"

echo "Compiling $(echo "$specs" | wc -l) snippets: $(echo "$specs" | cut -d: -f1 | tr '\n' ' ')"
# Deterministic hashing, as in scripts/examples.sh: SwiftPM passes a package's enabled traits as
# compiler flags in the order a Set iterates, which otherwise changes from one run to the next
# and recompiles Hummingbird (its two traits' order) and what depends on it.
DISKCACHE_SNIPPETS="$(echo "$specs" | tr '\n' ' ')" SWIFT_DETERMINISTIC_HASHING=1 \
    swift build --package-path Examples --target Snippets
