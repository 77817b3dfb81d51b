/// What can go wrong talking to a Ticks server.
public enum TicksClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered with an error in Stream's format (`code` is Stream's
    /// error code: 4 input, 5 auth, 16 not found, 17 not allowed, …).
    case api(statusCode: Int, code: Int, message: String)
    /// The server could not be reached, or did not answer in time.
    case unreachable(String)
    /// The server's answer could not be read.
    case invalidResponse(String)
    /// The call needs `ChatClient.connect(userID:token:)` first.
    case notConnected
    /// The message is not in the outbox (for `resend`) or not known here.
    case unknownMessage(String)

    /// Whether trying again later may succeed: the network, the server being
    /// down or overloaded. Input and permission errors are final.
    public var isTransient: Bool {
        switch self {
        case .unreachable: return true
        case .api(let status, _, _): return status >= 500 || status == 408 || status == 429
        case .invalidResponse, .notConnected, .unknownMessage: return false
        }
    }

    public var description: String {
        switch self {
        case .api(let status, let code, let message): return "the server refused (\(status), code \(code)): \(message)"
        case .unreachable(let reason): return "the server could not be reached: \(reason)"
        case .invalidResponse(let reason): return "the server's answer could not be read: \(reason)"
        case .notConnected: return "connect first"
        case .unknownMessage(let id): return "no message '\(id)' here"
        }
    }
}
