import HTTPTypes
import Hummingbird

/// Which web pages' scripts may call the API from a browser (CORS,
/// `ticks serve --cors-origin`). Every call is authorized by its token in a
/// header, never by a cookie, so letting any page call is what Stream does
/// and gives a page nothing its own token does not.
public enum BrowserOrigins: Sendable, Equatable {
    /// Any page (`Access-Control-Allow-Origin: *`), the default.
    case any
    /// Pages of these origins only (`https://chat.example.com`).
    case only([String])
    /// No page: answers carry no CORS headers, and browsers refuse their scripts.
    case none

    /// The headers Stream's JS client sends (`stream-auth-type`,
    /// `X-Stream-Client`, `x-client-request-id`), and a trace's `traceparent`.
    static let allowedHeaders: [HTTPField.Name] = [
        .accept, .authorization, .contentType, .origin, HTTPField.Name("stream-auth-type")!,
        HTTPField.Name("x-stream-client")!, HTTPField.Name("x-client-request-id")!, HTTPField.Name("traceparent")!,
    ]

    /// What a page's script may read of an answer beyond the basic headers.
    static let exposedHeaders = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"]

    /// The middleware for these origins; nil for `.none`.
    func middleware<Context: RequestContext>(_: Context.Type) -> BrowserOriginMiddleware<Context>? {
        switch self {
        case .none: nil
        case .any: BrowserOriginMiddleware(allowed: nil, cors: Self.cors(.all))
        case .only(let origins): BrowserOriginMiddleware(allowed: Set(origins), cors: Self.cors(.originBased))
        }
    }

    static func cors<Context: RequestContext>(_ allow: CORSMiddleware<Context>.AllowOriginExtended)
        -> CORSMiddleware<Context>
    {
        CORSMiddleware(
            allowOrigin: allow, allowHeaders: allowedHeaders,
            allowMethods: [.get, .post, .put, .patch, .delete, .head, .options], allowCredentials: false,
            exposedHeaders: exposedHeaders, maxAge: .minutes(10))
    }
}

/// Hummingbird's `CORSMiddleware` for the pages `allowed` (nil: any): a
/// request from another page's script passes on without CORS headers, and
/// the browser keeps the answer from that script.
public struct BrowserOriginMiddleware<Context: RequestContext>: RouterMiddleware {
    let allowed: Set<String>?
    let cors: CORSMiddleware<Context>

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        if let allowed, !allowed.contains(request.headers[.origin] ?? "") {
            return try await next(request, context)
        }
        var response = try await cors.handle(request, context: context, next: next)
        // Hummingbird's middleware names them on the preflight only; the browser reads them from each answer.
        if request.method != .options, response.headers[.accessControlAllowOrigin] != nil {
            response.headers[.accessControlExposeHeaders] = BrowserOrigins.exposedHeaders.joined(separator: ", ")
        }
        return response
    }
}
