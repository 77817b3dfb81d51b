import Foundation
import TicksProtocol

/// Marks a message delivered from where a push notification arrives — an
/// iOS notification service extension, an Android messaging service —
/// while the app itself is not running: one HTTP call, no WebSocket, no
/// database, so it fits in an extension's few seconds and little memory.
/// With it, ✓✓ means "on the phone", not "the app was opened".
///
/// ```swift
/// // UNNotificationServiceExtension.didReceive(_:withContentHandler:)
/// let delivery = PushDelivery(baseURL: server, apiKey: key)
/// try? await delivery.markDelivered(payload: request.content.userInfo)
/// ```
///
/// The token: best the recipient's `delivery_token` from Ticks' push hook,
/// which the push service copies into the payload (docs/webhooks.md) — it
/// may only mark that channel's messages delivered, and expires, so the
/// extension holds nothing more powerful. Otherwise the user's own token
/// (kept where the extension can read it, e.g. a shared keychain group),
/// passed as `token:`. The server applies the user's privacy settings (R10)
/// as for any mark delivered.
public struct PushDelivery: Sendable {
    /// The Ticks server, e.g. `https://chat.example.com`.
    public let baseURL: URL
    /// The app's API key.
    public let apiKey: String
    /// How long the one call may take (an extension has a few seconds in all).
    public let timeout: Duration

    /// Nothing is sent until `markDelivered`.
    public init(baseURL: URL, apiKey: String, timeout: Duration = .seconds(10)) {
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.timeout = timeout
    }

    /// The message a push payload is about: Stream's (`{"stream": {"id":
    /// message id, "cid": cid, …}}`), or `message_id` and `cid` at the top
    /// level (a payload of one's own). Nil when it names none.
    public static func message(in payload: [AnyHashable: Any]) -> (cid: ChannelID, messageID: String)? {
        // Stream's shape names the message `id` inside "stream"; one's own payload says `message_id`
        // (a top-level `id` may be anything of the push service's).
        let stream = payload["stream"] as? [AnyHashable: Any]
        guard let id = stream?["id"] as? String ?? payload["message_id"] as? String,
            let cidText = stream?["cid"] as? String ?? payload["cid"] as? String,
            let cid = ChannelID(cid: cidText), Identifier.isValid(id)
        else { return nil }
        return (cid, id)
    }

    /// The delivery-only token a payload carries (`delivery_token`, at the
    /// top level or beside the message's fields), as Ticks' push hook hands
    /// it to the push service.
    public static func deliveryToken(in payload: [AnyHashable: Any]) -> String? {
        let fields = (payload["stream"] as? [AnyHashable: Any]) ?? payload
        let token = fields["delivery_token"] as? String ?? payload["delivery_token"] as? String
        return token?.isEmpty == false ? token : nil
    }

    /// `message(in:)` of a payload as JSON (as a push service hands it over).
    public static func message(inJSON data: Data) -> (cid: ChannelID, messageID: String)? {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return message(in: object)
    }

    /// Marks the message a push payload names delivered to the token's
    /// user; false (and no call) when the payload names none.
    @discardableResult
    public func markDelivered(payload: [AnyHashable: Any], token: String) async throws -> Bool {
        guard let (cid, messageID) = Self.message(in: payload) else { return false }
        try await markDelivered(messageID: messageID, in: cid, token: token)
        return true
    }

    /// Marks the message a push payload names delivered with the payload's
    /// own `delivery_token`; false (and no call) when it names no message or carries no token.
    @discardableResult
    public func markDelivered(payload: [AnyHashable: Any]) async throws -> Bool {
        guard let token = Self.deliveryToken(in: payload) else { return false }
        return try await markDelivered(payload: payload, token: token)
    }

    /// Marks `messageID` (and everything before it in `cid`) delivered to the token's user.
    public func markDelivered(messageID: String, in cid: ChannelID, token: String) async throws {
        let api = APIClient(baseURL: baseURL, apiKey: apiKey, token: token, timeout: timeout)
        try await api.markDelivered([(cid, messageID)])
    }
}
