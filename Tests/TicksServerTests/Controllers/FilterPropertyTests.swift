import Foundation
import Hummingbird
import PropertyBased
import Testing

@testable import TicksServer

/// The server's own parsers of what clients send: filters and form-encoded
/// query values. Arbitrary input gives a value or a 4xx, never a trap.
@Suite("Server parsers never trap")
struct FilterPropertyTests {
    static let jsonish = Gen.element(of: Array(#"{}[]":, $in$eqmembercidtypeid0123456789abc\u"#)).compactMap { $0 }
        .string(of: 0...120)

    @Test("filter_conditions: any JSON decodes to a filter or a decoding error; the filter is within the limits")
    func filters() async {
        var limits = ServerLimits()
        limits.maxFilterValues = 3
        await propertyCheck(count: 3000, input: Self.jsonish) { text in
            guard
                let conditions = try? JSONDecoder().decode([String: FilterValue].self, from: Data(text.utf8))
            else { return }
            do {
                let filter = try ChannelFilter(conditions: conditions, limits: limits)
                for values in [filter.memberIn, filter.cids?.map(\.rawValue), filter.types, filter.ids] {
                    #expect((values?.count ?? 0) <= 3)
                }
                #expect(filter.matchesNothing == [filter.memberIn, filter.cids?.map(\.rawValue), filter.types, filter.ids].contains { $0 == [] })
            } catch let error as APIError {
                #expect(error.status == .badRequest)
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
        // The shapes Stream's SDKs send.
        let decoded = try? JSONDecoder().decode(
            [String: FilterValue].self, from: Data(#"{"members": {"$in": ["a", "b"]}, "type": "messaging", "id": {"$eq": "x"}}"#.utf8))
        #expect(decoded?["members"]?.values == ["a", "b"])
        #expect(decoded?["type"]?.values == ["messaging"])
        #expect(decoded?["id"]?.values == ["x"])
    }

    @Test("form decoding of query values: any text decodes or is refused, never traps")
    func formDecoding() async {
        let pieces: [String] = "%+=&aZ09 ".map(String.init) + ["%2", "%zz", "%C3%A9", "%FF", "é"]
        let formish = Gen.element(of: pieces).compactMap { $0 }
            .array(of: 0...40).map { $0.joined() }
        await propertyCheck(count: 3000, input: formish) { text in
            _ = Request.formDecode(Substring(text))
        }
        #expect(Request.formDecode("a+b%20c") == "a b c")
        #expect(Request.formDecode("%zz") == nil)
    }
}
