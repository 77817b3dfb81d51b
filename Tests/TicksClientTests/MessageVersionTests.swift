import Foundation
import Testing
import TicksProtocol

@testable import TicksClient

/// A message's versions heard in any order: live, in a catch-up that tells a
/// message in its state now (`message.new` of a message since deleted), or
/// an edit or delete that overtook its `message.new`. The state only moves
/// forward: a delete is final, otherwise the version changed last wins.
@Suite("Message versions in any order")
struct MessageVersionTests {
    static let start: Int64 = 1_800_000_000_000_000
    static let cid = ChannelID(type: "messaging", id: "v")
    static let alice = User(id: "alice", name: "Alice")
    /// `ChannelModel.maxEarlyVersions`.
    static let earlyBound = 256

    static func message(_ id: String, at seconds: Int64, updated: Int64? = nil, deleted: Bool = false, text: String = "hi")
        -> Message
    {
        var message = Message(
            id: id, cid: cid, text: text, user: alice, createdAt: Timestamp(microseconds: start + seconds * 1_000_000),
            updatedAt: Timestamp(microseconds: start + (updated ?? seconds) * 1_000_000))
        if deleted { message.deletedAt = message.updatedAt }
        return message
    }

    static func event(_ type: EventType, _ message: Message) -> Event {
        var event = Event(type: type, createdAt: message.updatedAt, cid: cid, user: alice)
        event.message = message
        return event
    }

    /// A loaded channel holding `messages`, seen by bob.
    static func model(_ messages: [Message]) -> ChannelModel {
        let now = Timestamp(microseconds: start)
        let config = ChannelConfig(name: "messaging", readEvents: true, deliveryEvents: true, createdAt: now, updatedAt: now)
        let state = ChannelState(
            channel: Channel(
                id: "v", type: "messaging", createdAt: now, updatedAt: now, createdBy: nil, memberCount: 2,
                lastMessageAt: now, config: config, custom: [:]),
            members: [Member(user: alice, createdAt: now), Member(user: User(id: "bob"), createdAt: now)],
            messages: messages, read: [], watcherCount: 0, membership: nil)
        var model = ChannelModel(cid: cid)
        _ = model.load(state, currentUserID: "bob")
        return model
    }

    func shown(_ model: ChannelModel, _ id: String) -> Message? { model.messages.first { $0.id == id } }

    @Test("a catch-up's message.new of a message since deleted deletes the one shown")
    func newOfDeleted() throws {
        var model = Self.model([Self.message("c1", at: 1), Self.message("c2", at: 2)])
        let outcome = model.apply(Self.event(.messageNew, Self.message("c2", at: 2, updated: 5, deleted: true)), currentUserID: "bob")
        #expect(outcome.changed)
        #expect(try #require(shown(model, "c2")).deletedAt != nil)
        // The same message.new again changes nothing.
        #expect(!model.apply(Self.event(.messageNew, Self.message("c2", at: 2, updated: 5, deleted: true)), currentUserID: "bob").changed)
    }

    @Test("a delete that overtook its message.new: the message arrives deleted")
    func deleteBeforeNew() throws {
        var model = Self.model([Self.message("c1", at: 1)])
        _ = model.apply(Self.event(.messageDeleted, Self.message("c2", at: 2, updated: 3, deleted: true)), currentUserID: "bob")
        #expect(shown(model, "c2") == nil)
        _ = model.apply(Self.event(.messageNew, Self.message("c2", at: 2)), currentUserID: "bob")
        #expect(try #require(shown(model, "c2")).deletedAt != nil)
    }

    @Test("nothing older replaces a newer version: no edit undeletes, no older edit undoes a newer one")
    func onlyForward() throws {
        var model = Self.model([Self.message("c1", at: 1)])
        _ = model.apply(Self.event(.messageUpdated, Self.message("c1", at: 1, updated: 4, text: "second")), currentUserID: "bob")
        _ = model.apply(Self.event(.messageUpdated, Self.message("c1", at: 1, updated: 3, text: "first")), currentUserID: "bob")
        #expect(shown(model, "c1")?.text == "second")
        _ = model.apply(Self.event(.messageDeleted, Self.message("c1", at: 1, updated: 5, deleted: true)), currentUserID: "bob")
        _ = model.apply(Self.event(.messageUpdated, Self.message("c1", at: 1, updated: 6, text: "third")), currentUserID: "bob")
        #expect(shown(model, "c1")?.deletedAt != nil)
    }

    @Test("versions of messages never seen are bounded")
    func earlyVersionsBounded() {
        var model = Self.model([Self.message("c1", at: 1)])
        for index in 0..<(Self.earlyBound * 2) {
            _ = model.apply(
                Self.event(.messageDeleted, Self.message("x\(index)", at: Int64(index + 10), deleted: true)),
                currentUserID: "bob")
        }
        // The newest are kept: the last one arrives deleted, the first one as it is sent.
        _ = model.apply(Self.event(.messageNew, Self.message("x\(Self.earlyBound * 2 - 1)", at: 9_000)), currentUserID: "bob")
        _ = model.apply(Self.event(.messageNew, Self.message("x0", at: 9_001)), currentUserID: "bob")
        #expect(shown(model, "x\(Self.earlyBound * 2 - 1)")?.deletedAt != nil)
        #expect(shown(model, "x0")?.deletedAt == nil)
    }
}
