import HTTPTypes
import Testing
import TicksTestSupport

@testable import TicksServer

/// docs/operations.md, "Browsers (CORS)": a page's script may call the API
/// as Stream's JS client does, from any page by default, from the listed
/// pages only, or from none.
@Suite("Browsers: CORS")
struct BrowserOriginsTests {
    static let page = "https://chat.example.com"

    /// A browser's preflight of `POST /channels` with the headers Stream's JS client sends.
    static func preflight(_ server: TestServer, from origin: String) async throws -> Reply {
        var headers = HTTPFields()
        headers[.origin] = origin
        headers[HTTPField.Name("Access-Control-Request-Method")!] = "POST"
        headers[HTTPField.Name("Access-Control-Request-Headers")!] =
            "authorization,content-type,stream-auth-type,x-stream-client,x-client-request-id"
        return try await server.execute(uri: "/channels?api_key=\(TestKeys.apiKey)", method: .options, headers: headers)
    }

    static let allowOrigin = HTTPField.Name("Access-Control-Allow-Origin")!
    static let allowHeaders = HTTPField.Name("Access-Control-Allow-Headers")!
    static let exposeHeaders = HTTPField.Name("Access-Control-Expose-Headers")!

    @Test("by default any page may call: the preflight needs no token, answers carry the header", arguments: StoreKind.all)
    func anyPage(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let preflight = try await Self.preflight(server, from: Self.page)
            #expect((200..<300).contains(preflight.status), "\(preflight.status) \(preflight.body)")
            #expect(preflight.headers[Self.allowOrigin] == "*")
            let allowed = Set(
                (preflight.headers[Self.allowHeaders] ?? "").lowercased().split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces)
                })
            for header in ["authorization", "content-type", "stream-auth-type", "x-stream-client", "x-client-request-id"] {
                #expect(allowed.contains(header), "\(header) not in \(allowed)")
            }
            try await server.upsert("alice")
            var headers = HTTPFields()
            headers[.origin] = Self.page
            let answer = try await server.call(.post, "/channels", body: "{}", headers: headers)
            #expect(answer.status == 200 && answer.headers[Self.allowOrigin] == "*")
            #expect(answer.headers[Self.exposeHeaders]?.contains("X-RateLimit-Remaining") == true)
            // An error in Stream's format carries it too: the page's script can read why.
            let refused = try await server.call(.post, "/channels", body: "{", headers: headers)
            #expect(refused.status == 400 && refused.headers[Self.allowOrigin] == "*")
        }
    }

    @Test("listed pages only; none: no page", arguments: [BrowserOrigins.only([page]), .none])
    func restricted(origins: BrowserOrigins) async throws {
        try await TestServer.run(browserOrigins: origins) { server in
            let other = try await Self.preflight(server, from: "https://evil.example.net")
            #expect(other.headers[Self.allowOrigin] == nil)
            let listed = try await Self.preflight(server, from: Self.page)
            #expect(listed.headers[Self.allowOrigin] == (origins == .none ? nil : Self.page))
            var headers = HTTPFields()
            headers[.origin] = "https://evil.example.net"
            let answer = try await server.call(.get, "/app", headers: headers)
            #expect(answer.status == 200 && answer.headers[Self.allowOrigin] == nil)
        }
    }
}
