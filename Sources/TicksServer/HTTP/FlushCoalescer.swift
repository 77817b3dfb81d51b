import NIOCore

/// Sends what was written during one turn of the event loop with one system
/// call: a flush is held back until the tasks queued on the loop have run.
///
/// A receipt sends its sender several frames in a row (the read, the
/// delivery that reading implies, read by all), and WSCore's outbound writer
/// flushes each frame on its own (it has no call that writes several before
/// one flush): a `writev` and a TCP segment per frame. Held back to the end
/// of the loop's turn, the flushes of frames written meanwhile become one.
/// Nothing waits past that turn (NIO runs the tasks queued while it runs
/// tasks in the same turn, before it polls the sockets again), and a close
/// flushes first, so a close frame written just before it still goes out.
final class FlushCoalescer: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// A flush was asked for and is queued on the loop.
    private var flushQueued = false
    /// The channel closed and its pipeline was taken down: nothing is left to flush.
    private var removed = false

    func flush(context: ChannelHandlerContext) {
        guard !flushQueued else { return }
        flushQueued = true
        context.eventLoop.assumeIsolated().execute { [self] in
            guard flushQueued, !removed else { return }
            flushQueued = false
            context.flush()
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        flushNow(context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
    }

    private func flushNow(_ context: ChannelHandlerContext) {
        guard flushQueued else { return }
        flushQueued = false
        context.flush()
    }
}
