import NIOCore

/// Sends what was written during one turn of the event loop with at most
/// two system calls: the first flush of a turn goes out at once, those after
/// it are held back until the tasks queued on the loop have run, and go as one.
///
/// A receipt sends its sender several frames in a row (the read, the
/// delivery that reading implies, read by all), and WSCore's outbound writer
/// flushes each frame on its own (it has no call that writes several before
/// one flush): a `writev` and a TCP segment per frame. Here the first frame
/// leaves at once (a lone frame, the usual case at low rates, waits for
/// nothing) and the rest of the turn's frames leave together at its end.
/// Nothing waits past that turn (NIO runs the tasks queued while it runs
/// tasks in the same turn, before it polls the sockets again), and a close
/// flushes first, so a close frame written just before it still goes out.
final class FlushCoalescer: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// A flush went out during this turn of the loop: the next ones wait for its end.
    private var turnFlushed = false
    /// A flush was held back until the turn's end.
    private var flushHeld = false
    /// The channel closed and its pipeline was taken down: nothing is left to flush.
    private var removed = false

    func flush(context: ChannelHandlerContext) {
        guard !turnFlushed else {
            flushHeld = true
            return
        }
        turnFlushed = true
        context.flush()
        context.eventLoop.assumeIsolated().execute { [self] in
            turnFlushed = false
            guard !removed else { return }
            flushHeldNow(context)
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        flushHeldNow(context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
    }

    private func flushHeldNow(_ context: ChannelHandlerContext) {
        guard flushHeld else { return }
        flushHeld = false
        context.flush()
    }
}
