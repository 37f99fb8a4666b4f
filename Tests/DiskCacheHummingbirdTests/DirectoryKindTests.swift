#if Hummingbird
import DiskCache
import DiskCacheHummingbird
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import Hummingbird
import Testing
import TestSupport

/// Each kind of cache the package makes, opened on a directory that another kind made first:
/// the second open throws `otherKind`, naming both kinds, and the first one's entries are
/// still there when it opens the directory again.
@Suite struct DirectoryKindTests {
    /// The caches the package opens in a directory of their own, each with the kind its code
    /// passes. The Vapor cache's opener lives in `DiskCacheVapor` (tested against each of these
    /// in `DiskCacheVaporTests`); here it is a `DiskCache` opened with its kind, as
    /// `app.caches.use(.disk(directory:))` opens it.
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case diskCache, httpURLCache, persistDriver, vaporCache, middleware

        var testDescription: String { rawValue }

        /// The kind written into `VERSION`.
        var name: String {
            switch self {
            case .diskCache: DiskCache.Configuration.defaultKind
            case .httpURLCache: "HTTPURLCache"
            case .persistDriver: DiskCachePersistDriver.cacheKind
            case .vaporCache: "vapor-cache"
            case .middleware: "HTTPURLCache.shared"
            }
        }

        /// Opens a cache of this kind in `directory`, stores a value, and closes it.
        func fill(_ directory: URL) async throws {
            switch self {
            case .diskCache, .vaporCache:
                let cache = try DiskCache(directory: directory, configuration: Self.configuration(name))
                try await cache.store(Data("kept".utf8), for: "k")
                try await cache.close()
            case .httpURLCache:
                let cache = try HTTPURLCache(directory: directory)
                cache.storeCachedResponse(Self.response, for: Self.request)
                try cache.responseStore.closeStore()
            case .persistDriver:
                let persist = try DiskCachePersistDriver(directory: directory)
                try await persist.set(key: "k", value: "kept", expires: nil)
                try await persist.shutdown()
            case .middleware:
                let middleware = try HTTPCachingMiddleware<BasicRequestContext>(directory: directory)
                middleware.cache.storeCachedResponse(Self.response, for: Self.request)
                try middleware.cache.responseStore.closeStore()
            }
        }

        /// Opens this kind in `directory` and says whether the value ``fill(_:)`` stored is there.
        func holdsItsValue(_ directory: URL) async throws -> Bool {
            switch self {
            case .diskCache, .vaporCache:
                let cache = try DiskCache(directory: directory, configuration: Self.configuration(name))
                let value = try await cache.data(for: "k")
                try await cache.close()
                return value == Data("kept".utf8)
            case .httpURLCache:
                let cache = try HTTPURLCache(directory: directory)
                defer { try? cache.responseStore.closeStore() }
                return cache.cachedResponse(for: Self.request)?.data == Data("kept".utf8)
            case .persistDriver:
                let persist = try DiskCachePersistDriver(directory: directory)
                let value = try await persist.get(key: "k", as: String.self)
                try await persist.shutdown()
                return value == "kept"
            case .middleware:
                let middleware = try HTTPCachingMiddleware<BasicRequestContext>(directory: directory)
                defer { try? middleware.cache.responseStore.closeStore() }
                return middleware.cache.cachedResponse(for: Self.request)?.data == Data("kept".utf8)
            }
        }

        /// Opens this kind in `directory` (and closes it again if that worked).
        func open(_ directory: URL) async throws {
            switch self {
            case .diskCache, .vaporCache:
                try await DiskCache(directory: directory, configuration: Self.configuration(name)).close()
            case .httpURLCache:
                try HTTPURLCache(directory: directory).responseStore.closeStore()
            case .persistDriver:
                try await DiskCachePersistDriver(directory: directory).shutdown()
            case .middleware:
                try HTTPCachingMiddleware<BasicRequestContext>(directory: directory).cache.responseStore.closeStore()
            }
        }

        static func configuration(_ kind: String) -> DiskCache.Configuration {
            var configuration = DiskCache.Configuration()
            configuration.kind = kind
            return configuration
        }

        static let request = URLRequest(url: URL(string: "http://localhost/kinds")!)
        static var response: CachedURLResponse {
            let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                           headerFields: ["Cache-Control": "max-age=600"])!
            return CachedURLResponse(response: response, data: Data("kept".utf8))
        }
    }

    static var pairs: [(Kind, Kind)] {
        Kind.allCases.flatMap { first in Kind.allCases.filter { $0 != first }.map { (first, $0) } }
    }

    @Test(arguments: pairs)
    func theSecondKindIsRefusedAndTheFirstKeepsItsEntries(first: Kind, second: Kind) async throws {
        try await withTemporaryDirectory("DirectoryKindTests") { directory in
            try await first.fill(directory)
            let before = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
            let mark = try String(contentsOf: directory.appendingPathComponent("VERSION"), encoding: .utf8)
            let error = await #expect(throws: DiskCacheError.self) { try await second.open(directory) }
            #expect(error?.code == .otherKind)
            #expect(error?.message.contains("\"\(first.name)\"") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("\"\(second.name)\"") == true, "\(error?.message ?? "")")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == before)
            #expect(try String(contentsOf: directory.appendingPathComponent("VERSION"), encoding: .utf8) == mark)
            #expect(try await first.holdsItsValue(directory))
        }
    }

    /// The issue's case, in apps: a persist driver's sessions, then a response cache opened on
    /// the same directory. The middleware throws; the sessions are all there.
    @Test func aResponseCacheOnThePersistDriversDirectoryIsRefused() async throws {
        try await withTemporaryDirectory("DirectoryKindTests") { directory in
            let persist = try DiskCachePersistDriver(directory: directory)
            for n in 0..<20 { try await persist.set(key: "session-\(n)", value: "user \(n)", expires: .seconds(3600)) }
            let error = #expect(throws: DiskCacheError.self) {
                try HTTPCachingMiddleware<BasicRequestContext>(directory: directory)
            }
            #expect(error?.code == .otherKind)
            for n in 0..<20 { #expect(try await persist.get(key: "session-\(n)", as: String.self) == "user \(n)") }
            try await persist.shutdown()
            let reopened = try DiskCachePersistDriver(directory: directory)
            for n in 0..<20 { #expect(try await reopened.get(key: "session-\(n)", as: String.self) == "user \(n)") }
            try await reopened.shutdown()
        }
    }
}
#endif
