import Foundation
import CoreMetrics
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import TicksProtocol

/// Turns every error into Stream's JSON error body, so a client never sees an
/// empty or HTML error. Unexpected errors are logged and answered with 500.
struct StreamErrorMiddleware: RouterMiddleware {
    typealias Context = TicksRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch {
            let apiError = Self.apiError(for: error)
            if apiError.status.code >= 500 {
                context.logger.error(
                    "request failed", metadata: ["error": "\(String(reflecting: error))", "path": "\(request.uri.path)"])
            } else {
                context.logger.debug("request refused", metadata: ["error": "\(apiError)"])
            }
            let body = APIErrorBody(
                code: apiError.code.rawValue, message: apiError.message, statusCode: apiError.status.code,
                duration: context.duration)
            let data = (try? JSONCoding.data(body)) ?? Data("{\"code\":-1}".utf8)
            return Response(
                status: apiError.status, headers: [.contentType: "application/json; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
    }

    static func apiError(for error: any Error) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case is NIOTooManyBytesError:
            return .tooLarge("the request body is larger than \(maxRequestBodyBytes) bytes")
        case let error as DecodingError:
            return .input(error.readableDescription)
        case let error as HTTPError:
            switch error.status {
            case .notFound: return .notFound("no such endpoint")
            case .methodNotAllowed: return APIError(status: .methodNotAllowed, code: .inputError, "method not allowed")
            case .contentTooLarge: return .tooLarge("the request body is too large")
            default:
                let code: APIError.Code = error.status.code < 500 ? .inputError : .internalError
                return APIError(status: error.status, code: code, error.body ?? error.status.reasonPhrase)
            }
        default:
            return APIError(status: .internalServerError, code: .internalError, "internal error")
        }
    }
}

/// Counts requests and times them, by route, for `GET /metrics`.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = TicksRequestContext
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let response = try await next(request, context)
        let route = context.endpointPath ?? "unmatched"
        let method = request.method.rawValue
        metrics.requestCounter(route: route, method: method, status: response.status.code).increment()
        metrics.requestTimer(route: route, method: method).recordInterval(since: context.startedAt)
        return response
    }
}

extension CoreMetrics.Timer {
    func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}

/// Checks `api_key` and the JWT of every authenticated route (SPEC §3).
struct AuthMiddleware: RouterMiddleware {
    typealias Context = TicksRequestContext
    let authority: TokenAuthority

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var context = context
        context.principal = try await authenticate(request)
        return try await next(request, context)
    }

    func authenticate(_ request: Request) async throws -> Principal {
        guard let apiKey = request.queryParameter("api_key"), !apiKey.isEmpty else {
            throw APIError.unauthorized("api_key is missing from the query")
        }
        guard apiKey == authority.credentials.apiKey else { throw APIError.unauthorized("api_key is not valid") }
        if let authType = request.headers[HTTPField.Name("stream-auth-type")!], authType.lowercased() != "jwt" {
            throw APIError.unauthorized("stream-auth-type must be jwt")
        }
        let header = request.headers[.authorization] ?? request.queryParameter("authorization")
        guard var token = header, !token.isEmpty else {
            throw APIError.unauthorized("the Authorization header is missing")
        }
        if token.hasPrefix("Bearer ") { token.removeFirst("Bearer ".count) }
        return try await authority.principal(for: token)
    }
}
