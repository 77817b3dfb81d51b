import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import Synchronization

/// Answers the request of a WebSocket upgrade (the router's answer decides
/// whether it upgrades), and keeps a rate limit's refusal of it whole.
///
/// hummingbird-websocket answers every refused upgrade with a bare 400 of
/// its own, whatever the router said. So when the router refuses one with a
/// 429 (`RateLimitMiddleware`: too many connects), its status, headers and
/// body go down the connection's pipeline as a `RefusedUpgrade`, and
/// `MalformedRequestResponder` writes them in place of that 400.
struct WebSocketUpgradeResponder<Base: HTTPResponder>: HTTPResponder where Base.Context == TicksRequestContext {
    typealias Context = TicksRequestContext
    let base: Base

    func respond(to request: Request, context: Context) async throws -> Response {
        let response = try await base.respond(to: request, context: context)
        guard response.status == .tooManyRequests else { return response }
        let refusal = RefusedUpgrade(
            status: HTTPResponseStatus(statusCode: Int(response.status.code)),
            headers: response.headers.map { ($0.name.rawName, $0.value) },
            body: try await Self.bytes(of: response.body))
        try await context.channel.triggerUserOutboundEvent(refusal).get()
        return response
    }

    /// The body's bytes (a refusal's is one small JSON buffer).
    static func bytes(of body: ResponseBody) async throws -> ByteBuffer {
        let collected = Collected()
        try await body.write(Collector(into: collected))
        return collected.bytes.withLock { $0 }
    }

    private final class Collected: Sendable {
        let bytes = Mutex(ByteBuffer())
    }

    /// Keeps what a body writes.
    private struct Collector: ResponseBodyWriter {
        let into: Collected

        mutating func write(_ buffer: ByteBuffer) async throws {
            into.bytes.withLock { $0.writeImmutableBuffer(buffer) }
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}

/// The answer to write instead of hummingbird-websocket's bare 400 for a
/// refused upgrade: an event for `MalformedRequestResponder`.
struct RefusedUpgrade: Sendable {
    var status: HTTPResponseStatus
    var headers: [(String, String)]
    var body: ByteBuffer
}
