import Foundation
import Testing
import TicksReceipts

/// One case of Tests/Fixtures/receipt-status-cases.json. The web demo's
/// JavaScript copy of the status rule runs the same file
/// (tests/python/test_browser.py), so the two cannot drift apart unnoticed.
struct StatusCase: Decodable, Sendable, CustomTestStringConvertible {
    var name: String
    var local: LocalSendState
    var features: ReceiptFeatures
    var others: [Cursors]
    var policy: GroupPolicy
    /// False for someone else's message. `ReceiptRules.status` is only asked
    /// about own messages (the SDK checks the author), so those cases are the demo's.
    var own: Bool
    var expected: DeliveryStatus?

    var testDescription: String { name }

    enum CodingKeys: String, CodingKey {
        case name, seq, others, policy, own, expected
        case sendState = "send_state"
        case readEvents = "read_events"
        case deliveryEvents = "delivery_events"
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        switch try c.decode(String.self, forKey: .sendState) {
        case "pending": local = .pending
        case "failed": local = .failed
        case "stored": local = .stored(seq: try c.decode(Seq.self, forKey: .seq))
        case let other:
            throw DecodingError.dataCorruptedError(forKey: .sendState, in: c, debugDescription: "unknown \(other)")
        }
        features = ReceiptFeatures(
            readEvents: try c.decode(Bool.self, forKey: .readEvents),
            deliveryEvents: try c.decode(Bool.self, forKey: .deliveryEvents))
        others = try c.decode([Cursors].self, forKey: .others)
        switch try c.decodeIfPresent(String.self, forKey: .policy) ?? "any_member" {
        case "any_member": policy = .anyMember
        case "all_members": policy = .allMembers
        case let other:
            throw DecodingError.dataCorruptedError(forKey: .policy, in: c, debugDescription: "unknown \(other)")
        }
        own = try c.decodeIfPresent(Bool.self, forKey: .own) ?? true
        // Required even when null: a forgotten `expected` must not read as "no indicator".
        guard c.contains(.expected) else {
            throw DecodingError.keyNotFound(
                CodingKeys.expected, .init(codingPath: c.codingPath, debugDescription: "\(name) has no expected"))
        }
        expected = try c.decodeIfPresent(DeliveryStatus.self, forKey: .expected)
    }

    /// Found beside this file's folder, so the test target needs no resources.
    static func all() throws -> [StatusCase] {
        struct Table: Decodable { var cases: [StatusCase] }
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/receipt-status-cases.json")
        return try JSONDecoder().decode(Table.self, from: Data(contentsOf: file)).cases
    }
}

@Suite("Delivery status: the table of cases shared with the web demo")
struct ReceiptRulesStatusCaseTests {
    @Test("ReceiptRules.status gives each case's expected status", arguments: try StatusCase.all().filter(\.own))
    func status(_ testCase: StatusCase) {
        let status = ReceiptRules.status(
            testCase.local, others: testCase.others, features: testCase.features, policy: testCase.policy)
        #expect(status == testCase.expected)
    }

    /// A table that lost its cases would pass the test above by running none.
    @Test("the table has every outcome, both policies, and no name twice")
    func table() throws {
        let cases = try StatusCase.all()
        #expect(cases.count >= 25)
        #expect(Set(cases.map(\.name)).count == cases.count)
        let outcomes = Set(cases.map { $0.expected?.rawValue ?? "none" })
        #expect(outcomes == ["pending", "failed", "sent", "delivered", "read", "none"])
        #expect(cases.contains { $0.policy == .allMembers })
    }
}
