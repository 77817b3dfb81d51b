import Foundation

/// Receipts a client sends as frames on the WebSocket it already holds,
/// and the server's answers: a Ticks extension to Stream's protocol, so a
/// phone with an open socket sends one frame instead of an HTTP request.
///
/// ```
/// → {"type": "mark_read", "request_id": "r1", "cid": "messaging:general", "message_id": "m5"}
/// ← {"type": "ack", "request_id": "r1", "created_at": "…", "event": {"type": "message.read", …}}
/// → {"type": "mark_delivered", "request_id": "r2", "latest_delivered_messages": [{"cid": "messaging:general", "id": "m6"}]}
/// ← {"type": "ack", "request_id": "r2", "created_at": "…"}
/// ← {"type": "ack", "request_id": "r3", "created_at": "…", "error": {"code": 17, "StatusCode": 403, …}}
/// ```
///
/// The rules, the events, the checks and the rate limits are those of
/// `POST /channels/{type}/{id}/read` and `POST /channels/delivered`, acting
/// as the socket's user. A socket handles its receipts one at a time, in
/// the order they were sent.
public enum SocketReceipt {
    public enum Kind: String, Codable, Sendable {
        case markRead = "mark_read"
        case markDelivered = "mark_delivered"
    }

    /// A `latest_delivered_messages` entry: the newest message of a channel the device received.
    public struct DeliveredEntry: Codable, Sendable, Equatable {
        public var cid: String
        public var id: String

        public init(cid: String, id: String) {
            self.cid = cid
            self.id = id
        }
    }

    public struct Request: Codable, Sendable, Equatable {
        public var type: Kind
        /// Chosen by the client; the ack carries it back.
        public var requestID: String
        /// Mark read: the channel.
        public var cid: String?
        /// Mark read: up to and including this message; the newest when nil.
        public var messageID: String?
        /// Mark delivered: at most 100 entries.
        public var latestDeliveredMessages: [DeliveredEntry]?

        public static func markRead(_ cid: String, upTo messageID: String?, requestID: String) -> Request {
            Request(type: .markRead, requestID: requestID, cid: cid, messageID: messageID)
        }

        public static func markDelivered(_ entries: [DeliveredEntry], requestID: String) -> Request {
            Request(type: .markDelivered, requestID: requestID, latestDeliveredMessages: entries)
        }

        enum CodingKeys: String, CodingKey {
            case type, cid
            case requestID = "request_id"
            case messageID = "message_id"
            case latestDeliveredMessages = "latest_delivered_messages"
        }
    }

    /// The answer to one request: done (with mark read's `message.read`
    /// event, as HTTP answers it), or Stream's error body.
    public struct Ack: Codable, Sendable, Equatable {
        public var type = "ack"
        public var requestID: String
        public var createdAt: Timestamp
        public var event: Event?
        public var error: APIErrorBody?

        public init(requestID: String, createdAt: Timestamp, event: Event? = nil, error: APIErrorBody? = nil) {
            self.requestID = requestID
            self.createdAt = createdAt
            self.event = event
            self.error = error
        }

        enum CodingKeys: String, CodingKey {
            case type, event, error
            case requestID = "request_id"
            case createdAt = "created_at"
        }

        /// The ack in a text frame, if it is one.
        public static func ack(in text: String) -> Ack? {
            guard text.contains(#""ack""#) else { return nil }
            return try? JSONDecoder().decode(Ack.self, from: Data(text.utf8))
        }
    }

    /// The request in a text frame, if it is one (health checks and anything else are not).
    public static func request(in text: String) -> Request? {
        guard text.contains(#""mark_"#) else { return nil }
        return try? JSONDecoder().decode(Request.self, from: Data(text.utf8))
    }
}
