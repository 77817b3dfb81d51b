import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// docs/compatibility.md, "Capabilities", cell by cell: `own_capabilities`
/// of every channel answer (a channel query, the distinct query, query
/// channels; v1 and v2) for every kind of viewer in channel types whose
/// switches differ. Stream's UI kits show an action only when its capability
/// is listed, so a capability Ticks does not serve must never be.
@Suite("own_capabilities: every viewer, every type, every answer")
struct CapabilityTableTests {
    /// Who looks at the channel.
    enum Viewer: String, CaseIterable, Sendable {
        /// An ordinary member with the global role `user`.
        case member
        /// The member who created the channel.
        case creator
        /// A member with the channel role moderator.
        case channelModerator
        /// A member whose global role is `admin`.
        case admin
        /// Not a member, seen through a server token acting as them (a user token is refused).
        case outsider
        /// A server token naming no user.
        case server
    }

    /// The channel types of the table: every switch on, then off.
    enum Kind: String, CaseIterable, Sendable {
        /// `messaging`: reads, deliveries, typing and replies on.
        case messaging
        /// A type with read and delivery events and replies off (typing on).
        case quiet
        /// `livestream`: reads, deliveries and typing off (Stream's built-in).
        case livestream
    }

    /// The rule, as docs/compatibility.md states it, written here on its own
    /// so that a change in the server's table shows.
    static func expected(_ viewer: Viewer, _ kind: Kind) -> Set<String> {
        if viewer == .outsider { return [] }
        var names: Set<String> = ["send-message", "update-own-message", "delete-own-message", "leave-channel"]
        if kind == .messaging || kind == .livestream { names.insert("send-reply") }
        if kind == .messaging { names.formUnion(["read-events", "delivery-events"]) }
        if kind != .livestream { names.formUnion(["typing-events", "send-typing-events"]) }
        if [.creator, .channelModerator, .admin, .server].contains(viewer) {
            names.formUnion(["update-channel", "update-channel-members", "delete-channel", "delete-any-message"])
        }
        if viewer == .admin || viewer == .server { names.insert("update-any-message") }
        return names
    }

    /// Capabilities of Stream's that Ticks does not serve: listing one would show a UI action that fails.
    static let unserved: Set<String> = [
        "send-reaction", "quote-message", "upload-file", "pin-message", "send-poll", "cast-poll-vote",
        "query-poll-votes", "search-messages", "mute-channel", "flag-message", "ban-channel-members",
        "freeze-channel", "set-channel-cooldown", "skip-slow-mode", "send-custom-events", "share-location",
        "join-channel", "connect-events",
    ]

    @Test("each viewer's own_capabilities follow the one rule", arguments: StoreKind.all)
    func table(kind store: StoreKind) async throws {
        try await TestServer.run(store) { server in
            try await server.upsert("owner", "mia", "mo", "outsider")
            try await server.ok(.post, "/users", #"{"users": {"ada": {"id": "ada", "role": "admin"}}}"#)
            try await server.ok(
                .post, "/channeltypes",
                #"{"name": "quiet", "read_events": false, "delivery_events": false, "replies": false}"#)
            for kind in Kind.allCases {
                let cid = "\(kind.rawValue):caps"
                try await server.createChannel(cid, members: ["owner", "mia", "mo", "ada"], createdBy: "owner")
                try await server.ok(.post, "/channels/\(kind.rawValue)/caps", #"{"add_moderators": ["mo"]}"#)
                for viewer in Viewer.allCases {
                    for (road, channel) in try await answers(server, cid: cid, kind: kind, viewer: viewer) {
                        let listed = channel["own_capabilities"].array.compactMap(\.string)
                        #expect(listed.count == Set(listed).count, "\(viewer) \(kind) \(road): \(listed)")
                        #expect(
                            Set(listed) == Self.expected(viewer, kind),
                            "\(viewer) in \(kind) by \(road): \(listed.sorted())")
                        #expect(Set(listed).isDisjoint(with: Self.unserved))
                    }
                }
            }
        }
    }

    /// The user a viewer stands for.
    static func user(_ viewer: Viewer) -> String? {
        switch viewer {
        case .member: "mia"
        case .creator: "owner"
        case .channelModerator: "mo"
        case .admin: "ada"
        case .outsider: "outsider"
        case .server: nil
        }
    }

    /// The channel object of every answer that shows `cid` to `viewer`, by the road it came.
    func answers(_ server: TestServer, cid: String, kind: Kind, viewer: Viewer) async throws -> [(String, JSON)] {
        let user = Self.user(viewer)
        // A user token for members; the server token acting as the user for the outsider, whom a user token
        // may not show the channel.
        let token = viewer == .outsider || viewer == .server ? nil : try await server.token(user!)
        let acting = viewer == .outsider ? #", "user_id": "outsider""# : ""
        let path = cid.replacingOccurrences(of: ":", with: "/")
        var found: [(String, JSON)] = []
        for prefix in ["", "/api/v2/chat"] {
            let query = try await server.ok(
                .post, "\(prefix)/channels/\(path)/query", #"{"state": true, "watch": false\#(acting)}"#, token: token)
            found.append(("\(prefix)/query", query["channel"]))
            // Query channels needs a member to act as; a server token naming no one lists every channel.
            let member = viewer == .outsider ? "" : #", "members": {"$in": ["\#(user ?? "mia")"]}"#
            let list = try await server.ok(
                .post, "\(prefix)/channels",
                #"{"filter_conditions": {"cid": "\#(cid)"\#(member)}\#(acting)}"#, token: token)
            let channels = list["channels"].array
            #expect(channels.count == 1, "\(prefix)/channels for \(viewer): \(channels.count)")
            found += channels.map { ("\(prefix)/channels", $0["channel"]) }
        }
        return found
    }
}
