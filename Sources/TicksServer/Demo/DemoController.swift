import Foundation
import Hummingbird
import Logging
import TicksProtocol

/// Demo mode (`ticks serve --demo`): the web client at `/` and a token for
/// whoever asks. None of it exists without the flag — in demo mode anyone who
/// can reach the port may act as any user, which is the point of a demo and
/// never what a real deployment wants.
struct DemoController {
    let authority: TokenAuthority
    /// How long a demo token lasts; the page signs in again when it expires.
    static let tokenLifetime: TimeInterval = 12 * 60 * 60

    /// Where the page's files are: copied into the module's resource bundle by SwiftPM.
    static var assetsFolder: String? { Bundle.module.url(forResource: "Assets", withExtension: nil)?.path }

    func addRoutes(to router: Router<TicksRequestContext>, logger: Logger) {
        router.on(.demoToken, use: token)
        guard let folder = Self.assetsFolder else {
            logger.error("demo mode: the web client's files are missing from the resource bundle")
            return
        }
        // Answers the GETs no route matched: `/` is index.html.
        // `no-cache`: the browser revalidates, so a rebuilt server's page is never stale.
        let cacheControl = CacheControl([(MediaType(type: .any), [.noCache])])
        router.add(
            middleware: FileMiddleware(folder, cacheControl: cacheControl, searchForIndexHtml: true, logger: logger))
    }

    struct TokenRequest: Decodable {
        var userID: String

        enum CodingKeys: String, CodingKey { case userID = "user_id" }
    }

    struct TokenAnswer: Encodable {
        var apiKey: String
        var userID: String
        var token: String

        enum CodingKeys: String, CodingKey {
            case apiKey = "api_key"
            case userID = "user_id"
            case token
        }
    }

    /// `POST /demo/token {"user_id"}` → the API key and a user token; the page
    /// then talks to the ordinary API with it, like any client.
    @Sendable func token(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(TokenRequest.self)
        try requireValidID(body.userID, "user id")
        let token = try await authority.userToken(for: body.userID, expiresIn: Self.tokenLifetime)
        return try context.respond(
            TokenAnswer(apiKey: authority.credentials.apiKey, userID: body.userID, token: token))
    }
}
