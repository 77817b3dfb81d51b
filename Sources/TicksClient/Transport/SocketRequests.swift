import Foundation
import Synchronization
import TicksProtocol

/// Receipts sent as frames on the open socket (`SocketReceipt`, Ticks'
/// extension), each waiting for the server's ack: one frame instead of an
/// HTTP request on a socket the client holds anyway.
///
/// `EventSocket` attaches a session's writer while a socket is open and
/// hands over every ack it reads; a request with no socket open, or whose
/// socket closes before the ack, fails with a transient error, so the caller
/// can send it over HTTP instead.
final class SocketRequests: Sendable {
    private struct State {
        var outgoing: AsyncStream<String>.Continuation?
        var pending: [String: CheckedContinuation<SocketReceipt.Ack, any Error>] = [:]
        var nextID = 0
    }

    private let state = Mutex(State())

    /// Sends the request made with a fresh request id and returns its ack.
    func send(_ make: @Sendable (_ requestID: String) -> SocketReceipt.Request) async throws -> SocketReceipt.Ack {
        try await withCheckedThrowingContinuation { continuation in
            let sent = state.withLock { state -> Bool in
                guard let outgoing = state.outgoing else { return false }
                state.nextID += 1
                let request = make("r\(state.nextID)")
                guard let frame = try? JSONEncoder().encode(request) else { return false }
                state.pending[request.requestID] = continuation
                outgoing.yield(String(decoding: frame, as: UTF8.self))
                return true
            }
            if !sent { continuation.resume(throwing: TicksClientError.unreachable("no socket is open")) }
        }
    }

    /// A socket opened: the frames to write on it, in order.
    func attach() -> AsyncStream<String> {
        let (frames, continuation) = AsyncStream.makeStream(of: String.self)
        let stale = state.withLock { state in
            defer { state.outgoing = continuation }
            return state.outgoing
        }
        stale?.finish()
        return frames
    }

    /// The socket closed: requests still waiting will never be answered on it.
    func detach() {
        let (outgoing, waiting) = state.withLock { state in
            defer {
                state.outgoing = nil
                state.pending = [:]
            }
            return (state.outgoing, Array(state.pending.values))
        }
        outgoing?.finish()
        for continuation in waiting {
            continuation.resume(throwing: TicksClientError.unreachable("the socket closed before the server answered"))
        }
    }

    /// The server answered a request.
    func received(_ ack: SocketReceipt.Ack) {
        let continuation = state.withLock { $0.pending.removeValue(forKey: ack.requestID) }
        continuation?.resume(returning: ack)
    }
}
