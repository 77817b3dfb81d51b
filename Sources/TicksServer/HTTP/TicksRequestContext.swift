import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import TicksProtocol

/// The context of every request: who is calling, and when the request began
/// (for Stream's `duration` field).
public struct TicksRequestContext: RequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let webSocket: WebSocketHandlerReference<Self>
    /// Set by `RateLimitMiddleware` or `AuthMiddleware` once the token checked out.
    public var principal: Principal?
    /// Set when the token is delivery-only (docs/webhooks.md): the one channel it may mark delivered in.
    public var deliveryOnly: ChannelID?
    public let startedAt: ContinuousClock.Instant
    /// The client's address: what a request without a valid token is rate limited by.
    public let remoteAddress: SocketAddress?
    /// The connection: where a refused WebSocket upgrade leaves its answer (`WebSocketUpgradeResponder`).
    let channel: any NIOCore.Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
        self.principal = nil
        self.deliveryOnly = nil
        self.startedAt = .now
        self.remoteAddress = source.channel.remoteAddress
        self.channel = source.channel
    }

    /// The API version of the route that matched (`/api/v2/…` is v2): how
    /// the answer is written.
    var apiVersion: APIVersion { APIVersion(path: endpointPath ?? "") }

    /// Stream's `duration`, e.g. `"1.23ms"`.
    var duration: String {
        let elapsed = ContinuousClock.now - startedAt
        let nanoseconds = elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
        let hundredths = (nanoseconds + 5_000) / 10_000
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)ms"
    }

    /// The principal of an authenticated route.
    /// A path parameter, percent-decoded (`%21members-…` is `!members-…`);
    /// 400 when its escapes are not valid UTF-8.
    func pathParameter(_ name: String) throws -> String {
        let raw = try parameters.require(name)
        guard raw.contains("%") else { return raw }
        guard let decoded = raw.removingPercentEncoding else {
            throw APIError.input("the path's \(name) is not validly percent-encoded")
        }
        return decoded
    }

    func requirePrincipal() throws -> Principal {
        guard let principal else { throw APIError.unauthorized("missing authentication") }
        return principal
    }

    /// The user a request acts as (docs/api.md, "Acting as a user"): a user token acts as its own user
    /// only; a server token acts as whichever user the request names, which
    /// must be a valid user id (400 otherwise, before any store sees it,
    /// whichever the token). A request may name its user in several places
    /// (`user_id`, `user.id`, ...): the first named counts, and every one
    /// must be a valid id.
    func actingUser(named first: String?, _ others: String?...) throws -> String? {
        try actingUser(among: [first] + others)
    }

    /// Like `actingUser(named:)`, for calls that must act as someone.
    func requireActingUser(named first: String?, _ others: String?...) throws -> String {
        guard let userID = try actingUser(among: [first] + others) else {
            throw APIError.input("name the user: user.id or user_id is required with a server token")
        }
        return userID
    }

    /// `actingUser(named:)` of a list.
    func actingUser(among candidates: [String?]) throws -> String? {
        let principal = try requirePrincipal()
        let named = candidates.compactMap { $0 }
        try named.forEach { try requireValidID($0, "user id") }
        switch principal {
        case .server:
            return named.first
        case .user(let own):
            if let first = named.first, first != own {
                throw APIError.forbidden("user '\(own)' cannot act for user '\(first)'")
            }
            return own
        }
    }
}

/// The largest request body Ticks accepts.
let maxRequestBodyBytes = ServerLimits.maxBodyBytes

extension Request {
    /// Decodes the JSON body (an empty body is `{}`) with a size limit; any
    /// problem becomes a 4xx in Stream's format.
    mutating func decodeJSON<T: Decodable>(_ type: T.Type) async throws -> T {
        let buffer = try await collectBody(upTo: maxRequestBodyBytes)
        let data = buffer.readableBytes == 0 ? Data("{}".utf8) : Data(buffer: buffer)
        do {
            return try JSONCoding.decoder(APIVersion(path: uri.path)).decode(type, from: data)
        } catch let error as DecodingError {
            throw APIError.input(error.readableDescription)
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError.input("the body is not valid JSON")
        }
    }
}

extension DecodingError {
    /// "field a.b: expected String" rather than Foundation's debug text.
    var readableDescription: String {
        func path(_ context: Context) -> String {
            let names = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return names.isEmpty ? "body" : names.joined(separator: ".")
        }
        switch self {
        case .typeMismatch(let type, let context): return "\(path(context)): expected \(type)"
        case .valueNotFound(let type, let context): return "\(path(context)): expected \(type), found null"
        case .keyNotFound(let key, let context):
            let prefix = path(context)
            return (prefix == "body" ? "" : prefix + ".") + "\(key.stringValue) is required"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "the body is not valid JSON" }
            return "\(path(context)): \(context.debugDescription)"
        @unknown default: return "the body could not be read"
        }
    }
}

/// A response body with Stream's `duration` added at the top level.
struct Timed<Body: Encodable>: Encodable {
    let body: Body
    let duration: String

    enum Key: String, CodingKey { case duration }

    func encode(to encoder: any Encoder) throws {
        try body.encode(to: encoder)
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(duration, forKey: .duration)
    }
}

/// `{"event":…,"duration":"…"}`, the answer to mark read (`Timed`'s shape), its
/// event written by `EventJSON` when it can be.
enum EventAnswer {
    static func data(_ event: Event?, duration: String, version: APIVersion = .v1) throws -> Data {
        var writer = EventJSON.Writer()
        writer.raw("{")
        if let event {
            // EventJSON writes v1's shapes only. v2's MarkReadResponseEvent has no room for
            // a thread without its participant counts, which Ticks does not keep: v2 leaves it out.
            guard version == .v1, let bytes = EventJSON.bytes(event) else {
                var event = event
                if version == .v2 { event.thread = nil }
                return try JSONCoding.data(Timed(body: Wrapped(event: event), duration: duration), version: version)
            }
            writer.raw("\"event\":")
            writer.out.append(contentsOf: bytes)
            writer.raw(",")
        }
        writer.key("duration")
        writer.string(duration)
        writer.raw("}")
        return Data(writer.out)
    }

    private struct Wrapped: Encodable { let event: Event }
}

/// An empty object (`{}` plus `duration`).
struct Empty: Codable {}

extension TicksRequestContext {
    /// A 2xx JSON answer carrying `duration`.
    func respond(_ body: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        try respond(data: JSONCoding.data(Timed(body: body, duration: duration), version: apiVersion), status: status)
    }

    /// `{"<key>": value, "duration": …}` in that order, whatever the encoder's
    /// key order: Stream's `GET /app` answer has `app` first, and its SDK
    /// suite checks it.
    func respond(_ key: StaticString, first value: some Encodable) throws -> Response {
        var writer = EventJSON.Writer()
        writer.raw("{")
        writer.key(key)
        writer.out.append(contentsOf: try JSONCoding.data(value, version: apiVersion))
        writer.raw(",")
        writer.key("duration")
        writer.string(duration)
        writer.raw("}")
        return respond(data: Data(writer.out))
    }

    /// `{"event": …}` (mark read's answer), written by `EventJSON`.
    func respond(event: Event?) throws -> Response {
        try respond(data: EventAnswer.data(event, duration: duration, version: apiVersion))
    }

    private func respond(data: Data, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension Request {
    /// A query parameter decoded as HTML forms encode it (`+` is a space, then
    /// percent-escapes), which is what Python's `requests` and most HTTP
    /// libraries send: `?payload={"a":+1}` must read as `{"a": 1}`.
    func queryParameter(_ name: String) -> String? {
        guard let query = uri.query else { return nil }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard Self.formDecode(parts[0]) == name else { continue }
            return parts.count == 2 ? Self.formDecode(parts[1]) : ""
        }
        return nil
    }

    /// 400 unless every name and value of the query decodes (its escapes
    /// are UTF-8): a parameter that cannot be decoded must not read as absent.
    func requireDecodableQuery() throws {
        guard let query = uri.query else { return }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            for part in pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            where Self.formDecode(part) == nil {
                throw APIError.input("the query is not validly percent-encoded UTF-8")
            }
        }
    }

    static func formDecode(_ text: Substring) -> String? {
        // Most names and values (api_key, tokens) have nothing to decode.
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else {
            return String(text)
        }
        return text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
