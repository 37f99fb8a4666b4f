// An image and thumbnail cache that works with files: values go into the cache from a file and
// come out as a file or as chunks, so a large image is never held in memory whole.
import DiskCache
import Foundation
#if canImport(Glibc)
import Glibc        // pread
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a fake "image" of `size` bytes: a PNG signature, then pseudo-random bytes.
func makeFakeImage(at url: URL, size: Int, seed: UInt64) throws {
    var data = Data(count: size)
    data.withUnsafeMutableBytes { bytes in
        var state = seed
        for i in bytes.indices {
            state = state &* 6364136223846793005 &+ 1442695040888963407   // a 64-bit LCG
            bytes[i] = UInt8(truncatingIfNeeded: state >> 56)
        }
    }
    data.replaceSubrange(0..<8, with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    try data.write(to: url)
}

func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

func runExample() async throws {
    // A scratch directory for the source files, and the cache beside it.
    let workDirectory = FileManager.default.temporaryDirectory
        .appendingPathComponent("ThumbnailCache-\(UUID().uuidString)", isDirectory: true)
    let cacheDirectory = workDirectory.appendingPathComponent("cache", isDirectory: true)
    try FileManager.default.createDirectory(at: workDirectory, withIntermediateDirectories: true)
    defer {
        try? FileManager.default.removeItem(at: workDirectory)
        print("Removed \(workDirectory.lastPathComponent)")
    }
    let cache = try DiskCache(directory: cacheDirectory, configuration: .init(durability: .none))

    // 1. The original image goes in with `.copy`: the file stays where it is (on btrfs or XFS the
    //    copy shares its blocks; elsewhere the kernel copies it). Metadata travels with the entry.
    let imageURL = workDirectory.appendingPathComponent("photo.png")
    try makeFakeImage(at: imageURL, size: 4 << 20, seed: 1)
    try await cache.store(contentsOf: imageURL, for: "images/photo-1/original",
                          metadata: ["content-type": "image/png", "width": "4000", "height": "3000"],
                          transfer: .copy)
    print("Stored photo.png (4 MiB) with .copy; the source is still there: \(exists(imageURL))")

    // 2. A generated thumbnail goes in with `.move`: the file is linked into the cache (no bytes
    //    copied on the same filesystem) and its own name removed once stored, so the temporary
    //    file needs no cleanup.
    let thumbnailURL = workDirectory.appendingPathComponent("photo-thumb.png")
    try makeFakeImage(at: thumbnailURL, size: 48 << 10, seed: 2)
    try await cache.store(contentsOf: thumbnailURL, for: "images/photo-1/thumb-256",
                          metadata: ["content-type": "image/png", "width": "256", "height": "192"],
                          transfer: .move)
    print("Stored photo-thumb.png (48 KiB) with .move; the source is still there: \(exists(thumbnailURL))")

    // 3. Read the original as a file. The closure gets a URL and an open descriptor that stay
    //    valid until it returns, even if the entry is replaced or evicted meanwhile; the checksum
    //    was verified before the call. Here only the first 8 bytes are read, with pread(2). In
    //    async code this is the async `withFile`: the file is prepared on the cache's I/O threads.
    let signature = try await cache.withFile(for: "images/photo-1/original") { file in
        print("withFile: \(file.url.lastPathComponent), \(file.size) bytes, "
            + "content-type \(file.metadata["content-type"] ?? "?"), \(file.metadata["width"] ?? "?")x\(file.metadata["height"] ?? "?")")
        var header = [UInt8](repeating: 0, count: 8)
        let count = header.withUnsafeMutableBytes { pread(file.fileDescriptor, $0.baseAddress, $0.count, 0) }
        return Array(header.prefix(max(0, count)))
    }
    if let signature {
        let isPNG = signature == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        print("  first bytes: \(signature.map { String(format: "%02x", $0) }.joined(separator: " ")) (PNG signature: \(isPNG))")
    }

    // The same through FileHandle, for the thumbnail (a small body, which the cache keeps inline
    // in its metadata file: withFile then writes it out to a temporary file of its own).
    let thumbnailHeader = try await cache.withFile(for: "images/photo-1/thumb-256") { file in
        let handle = try FileHandle(forReadingFrom: file.url)
        defer { try? handle.close() }
        return try handle.read(upToCount: 4) ?? Data()
    }
    print("withFile (thumbnail): first 4 bytes \(thumbnailHeader.map { Array($0) } ?? [])")

    // A missing key: withFile returns nil and the closure is not called.
    let missing = try await cache.withFile(for: "images/photo-2/original") { file in file.size }
    print("withFile for a key never stored: \(missing.map { "\($0)" } ?? "nil")")

    // 4. Stream the original in 1 MiB chunks, as a server would send it to a client. Chunks are
    //    read as they are asked for; the last one is delivered only after the whole body passed
    //    its checksum.
    if let chunks = try await cache.chunks(for: "images/photo-1/original", chunkSize: 1 << 20) {
        print("chunks: \(chunks.size) bytes, content-type \(chunks.metadata["content-type"] ?? "?")")
        var received = 0
        for try await chunk in chunks {
            received += chunk.count
            print("  chunk of \(chunk.count) bytes (\(received) so far)")
        }
    }

    // The entry's metadata can also be read without touching the body.
    if let entry = try await cache.entry(for: "images/photo-1/thumb-256") {
        let metadata = entry.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        print("entry: \(entry.key), \(entry.size) bytes, metadata: \(metadata.joined(separator: ", "))")
    }

    print("Cache holds \(cache.count) entries, \(cache.totalSize) bytes on disk")
    try await cache.close()
}

// As top-level code, the calls above would resolve to the synchronous overloads (main.swift's
// top-level code does not prefer async overloads): an async function makes Swift pick the async ones.
try await runExample()
