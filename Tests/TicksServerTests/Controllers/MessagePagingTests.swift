import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// docs/api.md, GetOrCreateChannel: the page keys of `messages` (`id_lt`,
/// `id_lte`, `id_gt`, `id_gte`, `id_around`, `created_at_around`), each
/// swept over every message of a channel and several limits, against the
/// rule written out here; a reply kept in its thread is never on a page.
@Suite("Pages of a channel's messages")
struct MessagePagingTests {
    /// What a page must hold: `shown` are the channel's messages oldest first, `at` the anchor's index.
    enum Key: CaseIterable {
        case lt, lte, gt, gte, around

        var name: String {
            switch self {
            case .lt: "id_lt"
            case .lte: "id_lte"
            case .gt: "id_gt"
            case .gte: "id_gte"
            case .around: "id_around"
            }
        }

        func expected(_ shown: [String], at index: Int, limit: Int) -> [String] {
            switch self {
            case .lt: return Array(shown[..<index].suffix(limit))
            case .lte: return Array(shown[...index].suffix(limit))
            case .gt: return Array(shown[(index + 1)...].prefix(limit))
            case .gte: return Array(shown[index...].prefix(limit))
            case .around: return Self.around(shown, from: index, limit: limit)
            }
        }

        /// Up to (limit - 1) / 2 older than `index`, then from it on; the side short of messages gives its room.
        static func around(_ shown: [String], from index: Int, limit: Int) -> [String] {
            let newer = Array(shown[index...].prefix(limit))
            let olderCount = min(index, max((limit - 1) / 2, limit - newer.count))
            return Array(shown[..<index].suffix(olderCount)) + newer.prefix(limit - olderCount)
        }
    }

    static let limits = [0, 1, 2, 3, 4, 7, 12]

    @Test("every key, every message, several limits: the page the rule gives", arguments: StoreKind.all)
    func sweep(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:p", members: ["alice", "bob"], createdBy: "alice")
            var shown: [String] = []
            var times: [Timestamp] = []
            for index in 1...10 {
                let id = "m\(index)"
                let answer = try await server.send("messaging:p", id: id, from: "alice")
                shown.append(id)
                times.append(try #require(answer["message"]["created_at"].time))
                if index == 4 {
                    // A reply kept in its thread is on no page, though it sits between m4 and m5.
                    try await server.ok(
                        .post, "/channels/messaging/p/message",
                        #"{"message": {"id": "r1", "text": "re", "parent_id": "m4", "user_id": "bob"}}"#)
                }
            }
            func page(_ messages: String) async throws -> [String] {
                let state = try await server.ok(
                    .post, "/channels/messaging/p/query", #"{"user_id": "alice", "messages": {\#(messages)}}"#)
                return state["messages"].array.compactMap { $0["id"].string }
            }
            // A few pages written out, so the rule above is not only checked against itself.
            for (messages, expected) in [
                (#""limit": 3, "id_around": "m5""#, ["m4", "m5", "m6"]),
                (#""limit": 4, "id_around": "m5""#, ["m4", "m5", "m6", "m7"]),
                (#""limit": 4, "id_around": "m1""#, ["m1", "m2", "m3", "m4"]),
                (#""limit": 4, "id_around": "m10""#, ["m7", "m8", "m9", "m10"]),
                (#""limit": 3, "id_around": "r1""#, ["m4", "m5", "m6"]),  // a thread's reply: around its place
                (#""limit": 2, "id_lt": "m5""#, ["m3", "m4"]),
                (#""limit": 2, "id_gt": "m4""#, ["m5", "m6"]),
                (#""limit": 2, "id_gte": "r1""#, ["m5", "m6"]),
                (#""limit": 2, "created_at_around": "\#(Timestamp(microseconds: times[9].microseconds + 1).rfc3339)""#, ["m9", "m10"]),
            ] {
                #expect(try await page(messages) == expected, "\(messages)")
            }
            for limit in Self.limits {
                #expect(try await page(#""limit": \#(limit)"#) == Array(shown.suffix(limit)), "newest, limit \(limit)")
                for (index, id) in shown.enumerated() {
                    for key in Key.allCases {
                        let got = try await page(#""limit": \#(limit), "\#(key.name)": "\#(id)""#)
                        #expect(got == key.expected(shown, at: index, limit: limit), "\(key.name) \(id), limit \(limit)")
                    }
                    // created_at_around: at the message's own time, and just after the one before it (m5's
                    // comes after r1, the reply between m4 and m5, and still lands on m5).
                    let justAfterTheOneBefore =
                        index == 0 ? Timestamp(microseconds: times[0].microseconds - 1) : Timestamp(microseconds: times[index - 1].microseconds + 1)
                    for time in [times[index], justAfterTheOneBefore] {
                        let got = try await page(#""limit": \#(limit), "created_at_around": "\#(time.rfc3339)""#)
                        #expect(got == Key.around(shown, from: index, limit: limit), "created_at_around \(time), limit \(limit)")
                    }
                }
                // After every message: the newest page.
                let late = Timestamp(microseconds: times.last!.microseconds + 1)
                let got = try await page(#""limit": \#(limit), "created_at_around": "\#(late.rfc3339)""#)
                #expect(got == Array(shown.suffix(limit)), "created_at_around after all, limit \(limit)")
            }
        }
    }

    @Test("two page keys, a bad id or time, a message of another channel or none: 400; a malformed page makes no channel", arguments: StoreKind.all)
    func refused(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:a", members: ["alice", "bob"], createdBy: "alice")
            try await server.createChannel("messaging:b", members: ["alice", "bob"], createdBy: "alice")
            try await server.send("messaging:a", id: "a1", from: "alice")
            try await server.send("messaging:b", id: "b1", from: "alice")
            // Malformed: refused before anything is made. Naming a message not in the channel: refused
            // when the page is read (a channel the call makes has none).
            let malformed = [
                #"{"id_lt": "a1", "id_gt": "a1"}"#, #"{"id_around": "a1", "created_at_around": "2026-01-01T00:00:00Z"}"#,
                #"{"id_gte": "a b"}"#, #"{"created_at_around": "yesterday"}"#, #"{"id_gt": 7}"#,
            ]
            for messages in malformed + [#"{"id_around": "b1"}"#, #"{"id_lte": "nope"}"#] {
                for cid in malformed.contains(messages) ? ["a", "new-one"] : ["a"] {
                    let reply = try await server.call(
                        .post, "/channels/messaging/\(cid)/query",
                        body: #"{"user_id": "alice", "data": {"members": ["alice"]}, "messages": \#(messages)}"#)
                    #expect(reply.status == 400, "\(messages): \(reply.body)")
                    try reply.expectError(400, code: 4)
                }
            }
            // The refused queries made no channel.
            let list = try await server.ok(
                .post, "/channels", #"{"filter_conditions": {"cid": "messaging:new-one"}, "user_id": "alice"}"#)
            #expect(list["channels"].array.isEmpty)
        }
    }
}
