import HTTPTypes
import Hummingbird
import TicksProtocol

/// An error a client caused or may see, answered in Stream's error format.
public struct APIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stream's error codes.
    public enum Code: Int, Sendable {
        case internalError = -1
        case inputError = 4
        case authFailed = 5
        case notFound = 16
        case notAllowed = 17
        case rateLimited = 9
        case payloadTooBig = 22
        /// The token's `exp` has passed: Stream's clients fetch a new token on this code alone.
        case tokenExpired = 40
    }

    public var status: HTTPResponse.Status
    public var code: Code
    public var message: String
    /// Seconds a client should wait before it tries again (`Retry-After`), on a 503.
    public var retryAfterSeconds: Int?

    public init(status: HTTPResponse.Status, code: Code, _ message: String, retryAfterSeconds: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    public var description: String { "\(status.code) \(message)" }

    public static func input(_ message: String) -> APIError { .init(status: .badRequest, code: .inputError, message) }
    public static func unauthorized(_ message: String) -> APIError {
        .init(status: .unauthorized, code: .authFailed, message)
    }
    /// 401 with code 40, Stream's code for an expired token: its client SDKs ask the app's token provider
    /// for a new token on this code (and on no other) and try again.
    public static func tokenExpired(_ message: String) -> APIError {
        .init(status: .unauthorized, code: .tokenExpired, message)
    }
    public static func forbidden(_ message: String) -> APIError { .init(status: .forbidden, code: .notAllowed, message) }
    public static func notFound(_ message: String) -> APIError { .init(status: .notFound, code: .notFound, message) }
    public static func conflict(_ message: String) -> APIError { .init(status: .conflict, code: .inputError, message) }
    public static func rateLimited(_ message: String) -> APIError {
        .init(status: .tooManyRequests, code: .rateLimited, message)
    }
    /// The store cannot serve the request now (`StoreError.unavailable`): 503, try again in a second.
    public static func unavailable(_ message: String) -> APIError {
        .init(status: .serviceUnavailable, code: .internalError, message, retryAfterSeconds: 1)
    }
    public static func tooLarge(_ message: String) -> APIError {
        .init(status: .contentTooLarge, code: .payloadTooBig, message)
    }
}

extension APIErrorBody {
    /// The body that answers `error`, on HTTP and on the socket.
    init(_ error: APIError, duration: String = "0.00ms") {
        self.init(code: error.code.rawValue, message: error.message, statusCode: error.status.code, duration: duration)
    }
}
