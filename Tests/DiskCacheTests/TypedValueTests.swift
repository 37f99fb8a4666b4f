@testable import DiskCache
import Foundation
import Testing

struct TypedValueTests {
    struct User: Codable, Equatable {
        var id: Int
        var name: String
        var joined: Date
        var tags: [String]
        var manager: String?
    }

    struct Order: Codable, Equatable {
        var number: String
        var total: Double
    }

    /// Encoding always fails.
    struct Unencodable: Encodable {
        struct Refused: Error {}
        func encode(to encoder: any Encoder) throws { throw Refused() }
    }

    let user = User(id: 42, name: "Ada", joined: Date(timeIntervalSince1970: 1_700_000_000), tags: ["a", "b"], manager: nil)

    @Test(arguments: [false, true])
    func valuesRoundTripWithEitherCoder(propertyList: Bool) throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let coder: any CacheCoder = propertyList ? PropertyListCacheCoder() : JSONCacheCoder()
        try cache.store(value: user, for: "user/42", coder: coder, metadata: ["kind": "user"])
        #expect(try cache.value(User.self, for: "user/42", coder: coder) == user)
        #expect(cache.entry(for: "user/42")?.metadata == ["kind": "user"])
        #expect(try cache.value(User.self, for: "user/43", coder: coder) == nil)

        // The bytes are the coder's own, readable without this library.
        let stored = try #require(cache.data(for: "user/42"))
        if propertyList {
            #expect(stored.starts(with: Data("bplist00".utf8)))
        } else {
            #expect(try JSONSerialization.jsonObject(with: stored) as? [String: Any] != nil)
            #expect(String(decoding: stored, as: UTF8.self).contains(#""joined":"2023-11-14T22:13:20Z""#))
        }
    }

    @Test func anUndecodableValueThrowsAndStaysUnlessAskedToGo() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(value: user, for: "k")
        #expect { try cache.value(Order.self, for: "k") } throws: { error in
            let error = error as? DiskCacheError
            return error?.code == .undecodableValue && error?.message.contains("the entry was kept") == true
        }
        #expect(try cache.value(User.self, for: "k") == user)
        #expect(throws: DiskCacheError.self) { try cache.value(Order.self, for: "k", removingIfUndecodable: true) }
        #expect(cache.data(for: "k") == nil)
    }

    @Test func aValueThatCannotBeEncodedStoresNothingAndKeepsTheEarlierOne() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(value: user, for: "k")
        #expect { try cache.store(value: Unencodable(), for: "k") } throws: { ($0 as? DiskCacheError)?.code == .invalidArgument }
        #expect(try cache.value(User.self, for: "k") == user)
        #expect(cache.statistics.writes == 1)
    }

    @Test func theTieredCacheStoresTypedValuesInEitherTier() throws {
        let dir = TemporaryDirectory()
        let tiered = try TieredCache(memoryCapacity: 1 << 20, diskCapacity: 1 << 20, directory: dir.cache)
        try tiered.store(value: user, for: "disk")
        try tiered.store(value: Order(number: "7", total: 9.5), for: "memory", policy: .allowedInMemoryOnly)
        #expect(try tiered.value(User.self, for: "disk") == user)
        #expect(try tiered.value(Order.self, for: "memory") == Order(number: "7", total: 9.5))
        #expect(tiered.disk?.contains("memory") == false)
        #expect { try tiered.value(User.self, for: "memory", removingIfUndecodable: true) } throws: {
            ($0 as? DiskCacheError)?.code == .undecodableValue
        }
        #expect(tiered.data(for: "memory") == nil)
    }
}
