import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1

/// The HTTP + WebSocket child channel with `ConnectionGuard` in front of it
/// and `MalformedRequestResponder` behind its HTTP decoder; every connection
/// is otherwise handled exactly as before.
struct QuiescingChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    let base: Base
    /// How long a new connection has to send its first whole request.
    let headerTimeout: Duration

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Base.Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(
                ConnectionGuard(headerTimeout: TimeAmount(headerTimeout)), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        let value = base.setup(channel: channel, logger: logger)
        // The base configured its HTTP pipeline synchronously: answer unparsable heads right after the decoder.
        do {
            let operations = channel.pipeline.syncOperations
            let decoder = try operations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try operations.addHandler(MalformedRequestResponder(), position: .after(decoder))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return value
    }

    func handle(value: Base.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Guards a new connection until the server first answers on it.
///
/// - **Header timeout.** hummingbird's idle timeout starts only once the
///   first request's head has been parsed, so a client that connects and
///   sends nothing, or a header a byte at a time (slowloris), would hold the
///   connection forever. This closes a connection whose first request head
///   has not been parsed within `headerTimeout`. The clock stops when the
///   decoder passes that head on (`RequestHeadArrived`, sent back by
///   `MalformedRequestResponder`), not when the answer is written: a first
///   request that is slow to answer (a busy store) is not cut off.
/// - **Quiescing.** Until the first request arrives, hummingbird-websocket's
///   pipeline has no handler that reacts to graceful shutdown, so a connection
///   opened but unused (HTTP clients pre-open them) kept `ticks serve` from
///   exiting until the client closed it. This closes such connections when
///   shutdown begins.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = IOData

    private let headerTimeout: TimeAmount
    private var used = false
    private var clockDone = false
    private var deadline: Scheduled<Void>?

    init(headerTimeout: TimeAmount) {
        self.headerTimeout = headerTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startClock(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startClock(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopClock()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopClock()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        used = true
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if !clockDone {
            clockDone = true
            stopClock()
        }
        context.write(data, promise: promise)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is RequestHeadArrived else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        clockDone = true
        stopClock()
        promise?.succeed()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, !used {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func startClock(_ context: ChannelHandlerContext) {
        guard deadline == nil, !clockDone else { return }
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: headerTimeout) {
            loopBound.value.close(promise: nil)
        }
    }

    private func stopClock() {
        deadline?.cancel()
        deadline = nil
    }
}

/// Sent toward the head of the pipeline when the decoder has parsed a
/// connection's first request head: the header timeout no longer applies.
struct RequestHeadArrived {}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
