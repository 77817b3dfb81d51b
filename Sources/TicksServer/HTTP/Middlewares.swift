import Foundation
import CoreMetrics
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import TicksProtocol

/// Turns every error into Stream's JSON error body, so a client never sees an
/// empty or HTML error. Unexpected errors are logged and answered with 500.
struct StreamErrorMiddleware: RouterMiddleware {
    typealias Context = TicksRequestContext
    /// The endpoints this server has routes for (the demo's only in demo mode).
    let served: Set<APIEndpoint>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            try request.requireDecodableQuery()
            return try await next(request, context)
        } catch {
            return response(for: error, to: request, context: context)
        }
    }

    /// The Stream-format answer to `error`.
    func response(for error: any Error, to request: Request, context: Context) -> Response {
        var apiError = Self.apiError(for: error)
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        // A path Ticks serves, with another method: 405 and the methods it takes.
        if apiError.status == .notFound, (error as? HTTPError)?.status == .notFound {
            let methods = APIEndpoint.methods(servingPath: request.uri.path, among: served)
            if !methods.isEmpty, !methods.contains(request.method) {
                apiError = APIError(status: .methodNotAllowed, code: .inputError, "\(request.method) is not allowed here")
                headers[.allow] = methods.map(\.rawValue).joined(separator: ", ")
            }
        }
        if let seconds = apiError.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        if apiError.status == .serviceUnavailable {
            // The store's health says once that it is away (`StoreHealth`), not every request.
            context.logger.debug("request answered 503", metadata: ["error": "\(apiError)", "path": "\(request.uri.path)"])
        } else if apiError.status.code >= 500 {
            context.logger.error(
                "request failed", metadata: ["error": "\(String(reflecting: error))", "path": "\(request.uri.path)"])
        } else {
            context.logger.debug("request refused", metadata: ["error": "\(apiError)"])
        }
        return Self.errorResponse(apiError, duration: context.duration, headers: headers)
    }

    static func errorResponse(_ apiError: APIError, duration: String, headers: HTTPFields = [:]) -> Response {
        let body = APIErrorBody(apiError, duration: duration)
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        let data = (try? JSONCoding.data(body)) ?? Data("{\"code\":-1}".utf8)
        return Response(status: apiError.status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func apiError(for error: any Error) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as StoreError:
            return APIError(error)
        case is NIOTooManyBytesError:
            return .tooLarge("the request body is larger than \(maxRequestBodyBytes) bytes")
        case let error as HTTPParserError:
            // A body that breaks HTTP/1.1 (a bad chunk size, say); a bad head never gets this far.
            return .input("the request is not valid HTTP/1.1 (\(error))")
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

/// Counts requests by route and status, and times them, for `GET /metrics`; counts those in flight.
/// Outermost, so it sees every answer as the client does: refusals (4xx),
/// failures (5xx) and rate limiting (429) included.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = TicksRequestContext
    let metrics: ServerMetrics
    /// Counts the requests in flight (what a stopping node still waits for).
    let readiness: NodeReadiness

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        readiness.requestStarted()
        defer { readiness.requestEnded() }
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            // Nothing inside should throw (StreamErrorMiddleware answers every error); count it if it does.
            record(request, context, status: 500)
            throw error
        }
        record(request, context, status: response.status.code)
        return response
    }

    func record(_ request: Request, _ context: Context, status: Int) {
        let route = context.endpointPath ?? "unmatched"
        let method = request.method.rawValue
        metrics.requestCounter(route: route, method: method, status: status).increment()
        metrics.requestTimer(route: route, method: method).recordInterval(since: context.startedAt)
        if status >= 400 { (status >= 500 ? metrics.serverErrors : metrics.clientErrors).increment() }
    }
}

extension CoreMetrics.Timer {
    func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}

/// Checks `api_key` and the JWT of every authenticated route (docs/api.md, "Authentication").
struct AuthMiddleware: RouterMiddleware {
    typealias Context = TicksRequestContext
    let authority: TokenAuthority

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var context = context
        // `RateLimitMiddleware` may have checked the same credentials already.
        if context.principal == nil {
            let grant = try await authenticate(request)
            context.principal = grant.principal
            context.deliveryOnly = grant.deliveryOnly
        }
        if let channel = context.deliveryOnly,
            APIEndpoint.matching(method: request.method, path: context.endpointPath) != .markDelivered
        {
            throw APIError.forbidden("this token may only mark messages of channel \(channel) delivered")
        }
        return try await next(request, context)
    }

    func authenticate(_ request: Request) async throws -> TokenGrant {
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
        return try await authority.grant(for: token)
    }
}

/// Stream's rate limits (`RateLimits`): counts each call against its caller
/// and endpoint, answers 429 (code 9) past the limit, and puts
/// `X-RateLimit-Limit`, `-Remaining` and `-Reset` on every answer, errors
/// included — except GET /app's, as Stream's (its 429 has them). Sits
/// outside `StreamErrorMiddleware`, so it sees errors as the responses they
/// become.
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = TicksRequestContext
    let limiter: RateLimiter
    let authority: TokenAuthority
    let metrics: ServerMetrics
    /// Answers what escapes the handlers (nothing should).
    let errors: StreamErrorMiddleware

    // Written in lower case, as Stream's servers send them: stream-chat-python
    // copies the headers into a plain dict and looks up `x-ratelimit-limit`.
    static let limitHeader = HTTPField.Name("x-ratelimit-limit")!
    static let remainingHeader = HTTPField.Name("x-ratelimit-remaining")!
    static let resetHeader = HTTPField.Name("x-ratelimit-reset")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let endpoint = APIEndpoint.matching(method: request.method, path: context.endpointPath)
        var context = context
        // The credentials first: a call is charged to whoever it really comes from (`identity(of:)`).
        if endpoint?.isAuthenticated == true {
            let grant = try? await AuthMiddleware(authority: authority).authenticate(request)
            context.principal = grant?.principal
            context.deliveryOnly = grant?.deliveryOnly
        }
        let decision = limiter.check(endpoint, by: Self.identity(of: context))
        var response: Response
        if decision.allowed {
            do {
                response = try await next(request, context)
            } catch {
                response = errors.response(for: error, to: request, context: context)
            }
        } else {
            metrics.rateLimited(endpoint).increment()
            response = StreamErrorMiddleware.errorResponse(decision.refusal(of: endpoint), duration: context.duration)
        }
        response.headers[Self.limitHeader] = String(decision.limit)
        response.headers[Self.remainingHeader] = String(decision.remaining)
        response.headers[Self.resetHeader] = String(decision.reset)
        return response
    }

    /// Who a call counts against: the app for a server token, the user for
    /// their own token, a budget of its own for a delivery-only token, and
    /// the client's address for a call without a valid token (forged or
    /// expired: 401). So a call refused for its credentials never spends a
    /// user's budget: a stolen delivery-only token refused everywhere but
    /// mark delivered (403) uses up only its own, and forged tokens only
    /// their sender's address (at most `RateLimiter.maxKeys` counters).
    static func identity(of context: Context) -> RateLimiter.Identity {
        switch context.principal {
        case .server: .app
        case .user(let userID):
            context.deliveryOnly.map { .delivery(user: userID, channel: $0.rawValue) } ?? .user(userID)
        case nil: .address(context.remoteAddress?.ipAddress ?? "unknown")
        }
    }
}
