import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore

/// The HTTP + WebSocket child channel with one fix for graceful shutdown.
///
/// Until a connection's first request arrives, hummingbird-websocket's
/// upgradable pipeline has no handler that reacts to the server quiescing, so
/// a connection a client opened but has not used yet (HTTP clients pre-open
/// them) kept `ticks serve` from exiting until the client closed it, up to a
/// minute later. This closes such connections when shutdown begins; every
/// other connection is handled exactly as before.
struct QuiescingChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    let base: Base

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Base.Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(CloseUnusedOnQuiesce(), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return base.setup(channel: channel, logger: logger)
    }

    func handle(value: Base.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Closes the connection on quiesce if it never received a byte; otherwise
/// passes the event on to the HTTP or WebSocket handlers.
final class CloseUnusedOnQuiesce: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private var used = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        used = true
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, !used {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
