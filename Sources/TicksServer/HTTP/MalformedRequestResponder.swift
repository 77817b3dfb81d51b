import Foundation
import NIOCore
import NIOHTTP1
import TicksProtocol

/// Answers a request whose head cannot be parsed — a URL and headers over
/// the parser's 80 KiB, a bad method, a stray byte — with 400 and Stream's
/// error body, then closes the connection.
///
/// Without it such a request got no answer at all on a new connection (the
/// WebSocket upgrade negotiation failed instead) and an empty 400 on a
/// reused one, which no Stream client can read. It sits right after the
/// HTTP decoder, so it sees every parse error before hummingbird does.
///
/// An error inside a request whose head was already passed on (a broken
/// chunked body) goes on to the request's handler, which answers it
/// (`StreamErrorMiddleware` maps `HTTPParserError` to 400). An error in a
/// pipelined request behind others is answered once their responses have
/// ended. The handler leaves the pipeline when the connection becomes a
/// WebSocket: what passes this point is no longer HTTP parts.
final class MalformedRequestResponder: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// A request's head went on and its body has not ended yet.
    private var bodyOpen = false
    /// Requests passed on whose responses have not ended yet.
    private var unanswered = 0
    /// A parse error to answer once the requests before it are answered.
    private var deferred: HTTPParserError?
    private var answered = false
    private var upgraded = false
    private var sawHead = false
    /// The router's answer to an upgrade it refused, to write instead of hummingbird-websocket's 400.
    private var refusedUpgrade: RefusedUpgrade?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            bodyOpen = true
            unanswered += 1
            if !sawHead {
                sawHead = true
                // The first head arrived whole: ConnectionGuard's header timeout is over.
                context.triggerUserOutboundEvent(RequestHeadArrived(), promise: nil)
            }
        case .end:
            bodyOpen = false
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status == .switchingProtocols:
            // WebSocket frames follow: this handler leaves once the 101 is flushed.
            upgraded = true
            context.write(data, promise: promise)
        case .head(let head) where head.status == .badRequest && head.headers["Content-Length"] == ["0"]:
            // hummingbird-websocket's answer to a refused upgrade: a rate limit's 429 as the router
            // wrote it, or `Upgrade: websocket` on a path other than /connect. Ticks' own 400s
            // always carry a body, so give this one Stream's.
            var head = head
            var body = Self.body(message: "only /connect upgrades to a WebSocket")
            if let refusal = refusedUpgrade {
                refusedUpgrade = nil
                head.status = refusal.status
                for (name, value) in refusal.headers { head.headers.replaceOrAdd(name: name, value: value) }
                body = refusal.body
            }
            head.headers.replaceOrAdd(name: "Content-Type", value: "application/json; charset=utf-8")
            head.headers.replaceOrAdd(name: "Content-Length", value: "\(body.readableBytes)")
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: promise)
        case .end:
            context.write(data, promise: promise)
            unanswered = max(unanswered - 1, 0)
            if unanswered == 0, let error = deferred {
                answer(error, context: context)
            }
        case .head, .body:
            context.write(data, promise: promise)
        }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let refusal = event as? RefusedUpgrade else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        refusedUpgrade = refusal
        promise?.succeed()
    }

    func flush(context: ChannelHandlerContext) {
        context.flush()
        if upgraded {
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parseError = error as? HTTPParserError, !bodyOpen else {
            context.fireErrorCaught(error)
            return
        }
        if unanswered > 0 {
            deferred = deferred ?? parseError
        } else {
            answer(parseError, context: context)
        }
    }

    /// Writes the 400, then ends the connection as a client's half-close
    /// would: the upgrade negotiation or hummingbird's request loop sees its
    /// input end, and the connection closes.
    private func answer(_ error: HTTPParserError, context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        deferred = nil
        let body = Self.body(for: error)
        var head = HTTPResponseHead(version: .http1_1, status: .badRequest)
        head.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        head.headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        head.headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            loopBound.value.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            loopBound.value.close(promise: nil)
        }
    }

    /// Stream's error body for a request that could not be parsed.
    static func body(for error: HTTPParserError) -> ByteBuffer {
        body(
            message: error == .headerOverflow
                ? "the request's URL and headers are larger than 80 KiB"
                : "the request is not valid HTTP/1.1 (\(error))")
    }

    static func body(message: String) -> ByteBuffer {
        let apiError = APIError.input(message)
        let body = APIErrorBody(apiError)
        return ByteBuffer(bytes: (try? JSONCoding.data(body)) ?? Data(#"{"code":4}"#.utf8))
    }
}
