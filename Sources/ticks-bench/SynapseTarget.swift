import Foundation
import NIOHTTP1
import Synchronization

/// Matrix Synapse over the client-server API: readers post `m.read`
/// receipts, each sender long-polls `/sync` for them.
struct SynapseTarget: ReceiptTarget {
    let name = "synapse"
    let supportsDelivered = false
    let baseURL: String
    let http: HTTP

    func api(_ path: String) -> String { "\(baseURL)/_matrix/client/v3\(path)" }
    func auth(_ token: String) -> [(String, String)] { [("Authorization", "Bearer \(token)")] }

    /// Registers a user (the bench's homeserver allows it without verification) and returns its access token.
    func register(_ name: String) async throws -> (userID: String, token: String) {
        let reply = try await http.json(
            .POST, api("/register"),
            json: "{\"username\": \"\(name)\", \"password\": \"bench-\(name)\", \"auth\": {\"type\": \"m.login.dummy\"}}")
        guard let userID = reply["user_id"] as? String, let token = reply["access_token"] as? String else {
            throw HTTP.Failure(status: 0, body: "register \(name): \(reply)")
        }
        return (userID, token)
    }

    func prepare(channels count: Int, readersPerChannel: Int, messagesPerChannel: Int, prefix: String) async throws
        -> [BenchChannel]
    {
        let made = Locked<[BenchChannel]>([])
        try await forEachConcurrently(Array(0..<count), width: 8) { index in
            let sender = try await register("\(prefix)s\(index)")
            var readers: [(userID: String, token: String)] = []
            for reader in 0..<readersPerChannel { readers.append(try await register("\(prefix)r\(index)x\(reader)")) }
            let invites = readers.map { "\"\($0.userID)\"" }.joined(separator: ",")
            let room = try await http.json(
                .POST, api("/createRoom"), headers: auth(sender.token),
                json: "{\"preset\": \"private_chat\", \"invite\": [\(invites)]}")
            guard let roomID = room["room_id"] as? String else { throw HTTP.Failure(status: 0, body: "\(room)") }
            let escapedRoom = roomID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? roomID
            for reader in readers {
                try await http.call(.POST, api("/rooms/\(escapedRoom)/join"), headers: auth(reader.token), json: "{}")
            }
            var eventIDs: [String] = []
            for number in 0..<messagesPerChannel {
                let sent = try await http.json(
                    .PUT, api("/rooms/\(escapedRoom)/send/m.room.message/\(prefix)t\(index)x\(number)"),
                    headers: auth(sender.token), json: "{\"msgtype\": \"m.text\", \"body\": \"message \(number)\"}")
                guard let eventID = sent["event_id"] as? String else { throw HTTP.Failure(status: 0, body: "\(sent)") }
                eventIDs.append(eventID)
            }
            let channel = BenchChannel(
                index: index, id: roomID, sender: sender.userID, senderToken: sender.token,
                readers: readers.map(\.userID), readerTokens: readers.map(\.token), messageIDs: eventIDs)
            made.withLock { $0.append(channel) }
        }
        return made.withLock { $0 }.sorted { $0.index < $1.index }
    }

    /// Only read receipts, no timeline: the smallest sync that carries them.
    static let filter = """
        {"room": {"timeline": {"limit": 0}, "state": {"types": []}, "ephemeral": {"types": ["m.receipt"]},
        "account_data": {"types": []}}, "presence": {"types": []}, "account_data": {"types": []}}
        """.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!

    func listen(to channels: [BenchChannel], seen: @escaping @Sendable (String) -> Void) async throws -> Listening {
        // The long polls get connections of their own: in the readers' pool
        // they would hold connections the receipts need.
        let polls = HTTP(connections: channels.count + 4)
        // A first sync for each sender, to start long-polling from now.
        let since = Locked<[Int: String]>([:])
        try await forEachConcurrently(channels, width: 16) { channel in
            let reply = try await http.json(
                .GET, api("/sync?timeout=0&filter=\(Self.filter)"), headers: auth(channel.senderToken))
            guard let next = reply["next_batch"] as? String else { throw HTTP.Failure(status: 0, body: "\(reply)") }
            since.withLock { $0[channel.index] = next }
        }
        let tasks = channels.map { channel in
            let start = since.withLock { $0[channel.index]! }
            return Task {
                var token = start
                while !Task.isCancelled {
                    guard
                        let reply = try? await polls.json(
                            .GET, api("/sync?timeout=20000&since=\(token)&filter=\(Self.filter)"),
                            headers: auth(channel.senderToken))
                    else {
                        try? await Task.sleep(for: .milliseconds(50))
                        continue
                    }
                    if let next = reply["next_batch"] as? String { token = next }
                    for key in Self.receiptKeys(in: reply) { seen(key) }
                }
            }
        }
        return Listening(tasks: tasks, client: polls)
    }

    /// `m.receipt` content: `{event_id: {"m.read": {user_id: {"ts": …}}}}`.
    static func receiptKeys(in sync: [String: Any]) -> [String] {
        guard let rooms = (sync["rooms"] as? [String: Any])?["join"] as? [String: Any] else { return [] }
        var keys: [String] = []
        for case let room as [String: Any] in rooms.values {
            guard let events = (room["ephemeral"] as? [String: Any])?["events"] as? [[String: Any]] else { continue }
            for event in events where event["type"] as? String == "m.receipt" {
                guard let content = event["content"] as? [String: Any] else { continue }
                for (eventID, value) in content {
                    guard let readers = (value as? [String: Any])?["m.read"] as? [String: Any] else { continue }
                    for reader in readers.keys { keys.append(receiptKey(reader: reader, message: eventID, kind: .read)) }
                }
            }
        }
        return keys
    }

    func mark(_ kind: ReceiptKind, channel: BenchChannel, reader: Int, message: Int) async throws {
        let room = channel.id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? channel.id
        let event = channel.messageIDs[message].addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        try await http.call(
            .POST, api("/rooms/\(room)/receipt/m.read/\(event)"), headers: auth(channel.readerTokens[reader]), json: "{}")
    }
}
