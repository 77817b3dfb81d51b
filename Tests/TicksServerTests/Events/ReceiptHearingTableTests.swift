import Foundation
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// One case of Tests/Fixtures/receipt-hearing-cases.json: a committed cursor
/// move, and what each road tells of it.
struct HearingCase: Decodable, Sendable, CustomTestStringConvertible {
    struct Privacy: Decodable, Sendable {
        var reads: Bool?
        var deliveries: Bool?
    }
    struct Reached: Decodable, Sendable {
        var kind: String
        var author: String
    }
    struct Send: Decodable, Sendable, Equatable, CustomStringConvertible {
        var event: String
        var to: [String]
        var description: String { "\(event) → \(to.joined(separator: ","))" }
    }

    var name: String
    var members: [String: Privacy]
    var size: Int?
    var readEvents: Bool?
    var deliveryEvents: Bool?
    var reciprocal: Bool?
    var reader: String
    var moved: [String]
    var authors: [String]?
    var reachedAll: [Reached]?
    var live: [Send]
    var webhooks: [String]
    var sync: [String: [String]]

    var testDescription: String { name }

    /// Found beside this file's folder, so the test target needs no resources.
    static func all() throws -> [HearingCase] {
        struct Table: Decodable { var cases: [HearingCase] }
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/receipt-hearing-cases.json")
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(Table.self, from: Data(contentsOf: file)).cases
    }

    static let before = Timestamp(microseconds: 1_700_000_000_000_000)
    static let at = before + .seconds(10)

    var users: [String: User] {
        Dictionary(
            uniqueKeysWithValues: members.map { id, privacy in
                let settings = PrivacySettings(
                    readReceipts: privacy.reads.map { PrivacySettings.Toggle(enabled: $0) },
                    deliveryReceipts: privacy.deliveries.map { PrivacySettings.Toggle(enabled: $0) })
                return (
                    id,
                    User(id: id, privacySettings: privacy.reads == nil && privacy.deliveries == nil ? nil : settings)
                )
            })
    }

    var config: ChannelConfig {
        ChannelConfig(
            name: "messaging", readEvents: readEvents ?? true, deliveryEvents: deliveryEvents ?? true,
            createdAt: Self.before, updatedAt: Self.before)
    }

    var channel: ChannelRecord {
        ChannelRecord(
            pk: 1, cid: ChannelID(type: "messaging", id: "hearing"), createdBy: nil, custom: [:], lastSeq: 5,
            lastMessageAt: Self.before, memberCount: size ?? members.count, createdAt: Self.before,
            updatedAt: Self.before)
    }

    /// Before the move the reader had read and received up to 2, or received up to 5 already
    /// when only the read moves; the move takes what moved to 5.
    var outcome: CursorOutcome {
        let readMoved = moved.contains("read")
        let deliveredMoved = moved.contains("delivered")
        let before = Cursors(read: 2, delivered: deliveredMoved ? 2 : 5)
        let update =
            readMoved
            ? ReceiptRules.markRead(before, upTo: 5, newest: 5) : ReceiptRules.markDelivered(before, upTo: 5, newest: 5)
        let cursors = update.cursors
        let state = MemberState(
            userID: reader, joinedAt: Self.before - .seconds(60), channelRole: .member, cursors: cursors,
            readAt: readMoved ? Self.at : Self.before - .seconds(30),
            deliveredAt: deliveredMoved ? Self.at : Self.before - .seconds(30),
            lastReadMessageID: "m\(cursors.read)", lastDeliveredMessageID: "m5", unread: 0, firstUnreadMessageID: nil)
        let audience = ReceiptAudience(fullChannelLimit: 100)
        let recipients: [String] =
            switch audience.source(of: update, in: channel) {
            case .members?: audience.recipients(members.keys.sorted(), from: .members, reader: reader)
            case .authors(let after, let through)?:
                audience.recipients(authors ?? [], from: .authors(after: after, through: through), reader: reader)
            case nil: []
            }
        let reached = (reachedAll ?? []).map {
            ReachedAll(kind: $0.kind == "read" ? .read : .delivered, author: $0.author, messageID: "m5", seq: 5)
        }
        // As the store reads it in the move's transaction: the setting, and which hearers hide their reads.
        let hiding = users.values.filter { !$0.sharesReadReceipts }.map(\.id)
        let hearers = HearersPrivacy(reciprocal: reciprocal ?? false, hidingReads: Set(hiding))
            .among(recipients + reached.map(\.author))
        return CursorOutcome(
            channel: channel, config: config, reader: users[reader] ?? User(id: reader), update: update, state: state,
            totals: UnreadTotals(messages: 0, channels: 0), at: Self.at, recipients: recipients, reachedAll: reached,
            hearers: hearers)
    }

    /// Whether `viewer` sees the others' reads only as deliveries (R15), as `POST /sync` asks it.
    func seesReadsAsDeliveries(_ viewer: String) -> Bool {
        let sharesReads = users[viewer]?.sharesReadReceipts ?? true
        return ReceiptVisibility.seesReadsAsDeliveries(sharesReads: sharesReads, reciprocal: reciprocal ?? false)
    }
}

/// Who hears a receipt (Events/ReceiptHearing.swift) as a table, without a
/// server: for each case the live events with their recipients, the
/// webhooks' events and what `POST /sync` tells each member.
@Suite("Who hears a receipt: the table of cases")
struct ReceiptHearingTableTests {
    @Test("the live events and their recipients", arguments: try HearingCase.all())
    func live(_ testCase: HearingCase) {
        let sends = Telling(testCase.outcome).live
        let told = sends.map { HearingCase.Send(event: $0.event.type.rawValue, to: $0.to.sorted()) }
        #expect(told == testCase.live)
    }

    @Test("the webhooks' events", arguments: try HearingCase.all())
    func webhooks(_ testCase: HearingCase) {
        #expect(Telling(testCase.outcome).toOthers.map(\.type.rawValue) == testCase.webhooks)
    }

    @Test("what POST /sync tells each member", arguments: try HearingCase.all())
    func sync(_ testCase: HearingCase) {
        let outcome = testCase.outcome
        let users = testCase.users
        var told: [String: [String]] = [:]
        for viewer in testCase.members.keys {
            let visibility = ReceiptVisibility(
                config: outcome.config, users: users, viewer: viewer,
                seesReadsAsDeliveries: testCase.seesReadsAsDeliveries(viewer))
            let synced = SyncedCursors(
                outcome.state, in: outcome.channel, visibility: visibility, since: HearingCase.before)
            told[viewer] = (synced.read ? ["read"] : []) + (synced.delivered ? ["delivered"] : [])
        }
        #expect(told == testCase.sync)
    }

    /// A table that lost its cases would pass the tests above by running none.
    @Test("the table covers R8, R9, R10, R13, R15 and large channels, and names no case twice")
    func table() throws {
        let cases = try HearingCase.all()
        #expect(Set(cases.map(\.name)).count == cases.count)
        for rule in ["R8", "R9", "R10", "R13", "R15", "large channel"] {
            #expect(cases.contains { $0.name.contains(rule) }, "no case of \(rule)")
        }
        #expect(cases.count >= 20)
    }
}
