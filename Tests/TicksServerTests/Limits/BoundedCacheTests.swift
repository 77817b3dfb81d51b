import Testing

@testable import TicksServer

@Suite("Bounded caches")
struct BoundedCacheTests {
    @Test("never more than maxEntries entries or maxBytes bytes, whatever is inserted")
    func bounds() {
        let cache = BoundedCache<Int, String>(maxEntries: 100, maxBytes: 10_000)
        for key in 0..<10_000 {
            cache.insert("v", for: key, cost: (key * 7919) % 600 + 1)
            let usage = cache.usage
            #expect(usage.entries <= 100)
            #expect(usage.bytes <= 10_000)
        }
        // An entry worth more than half the budget is not kept at all.
        cache.insert("huge", for: -1, cost: 6_000)
        #expect(cache.value(for: -1) == nil)
    }

    @Test("recently used entries survive a rotation")
    func recency() {
        let cache = BoundedCache<Int, Int>(maxEntries: 10, maxBytes: 1 << 20)
        for key in 0..<5 { cache.insert(key, for: key, cost: 1) }
        for key in 5..<10 {
            #expect(cache.value(for: 0) == 0)  // keep touching 0
            cache.insert(key, for: key, cost: 1)
        }
        #expect(cache.value(for: 0) == 0)
        #expect(cache.usage.entries <= 10)
    }

    @Test("the decoded-user cache is bounded in bytes: distinct large users do not grow it")
    func decodedUsers() throws {
        let cache = DecodedCache<String>(maxEntries: 100_000, maxBytes: 1 << 20)
        for index in 0..<2_000 {
            let text = "{\"id\":\"u\(index)\",\"bio\":\"" + String(repeating: "x", count: 4_000) + "\"}"
            _ = cache.value(for: text) { $0 }
        }
        #expect(cache.entries.usage.bytes <= 1 << 20)
    }

    @Test("verified tokens are bounded in bytes too")
    func tokens() {
        let tokens = VerifiedTokens(maxEntries: 1_000_000, maxBytes: 64 * 1024)
        for index in 0..<10_000 {
            tokens.remember("token-\(index)-" + String(repeating: "t", count: 200), .user("u\(index)"), expires: nil)
        }
        let last = "token-9999-" + String(repeating: "t", count: 200)
        #expect(tokens.principal(for: last, at: .now) == .user("u9999"))
        #expect(tokens.entries.usage.bytes <= 64 * 1024)
    }
}
