import Foundation
import HTTPTypes
import NIOCore
import Testing
import TicksTestSupport

@testable import TicksServer

/// `ticks serve --demo`: the web client's files and a token for anyone; without
/// the flag, neither exists.
@Suite("Demo mode")
struct DemoTests {
    /// A request outside the Stream API: no api_key, no token.
    func plain(_ server: TestServer, _ method: HTTPRequest.Method, _ path: String, body: String? = nil) async throws
        -> (reply: Reply, contentType: String?)
    {
        let reply = try await server.execute(
            uri: path, method: method, headers: [.contentType: "application/json"],
            body: body.map { ByteBuffer(string: $0) })
        return (reply, reply.headers[.contentType])
    }

    /// A JWT's claims, unverified.
    func claims(of token: String) throws -> JSON {
        var base64 = String(token.split(separator: ".")[1])
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return try JSON(parsing: String(decoding: try #require(Data(base64Encoded: base64)), as: UTF8.self))
    }

    @Test("without --demo there is no page and no token endpoint")
    func offByDefault() async throws {
        try await TestServer.run { server in
            for path in ["/", "/index.html", "/ticks-demo.js"] {
                try await plain(server, .get, path).reply.expectError(404, code: 16)
            }
            try await plain(server, .post, "/demo/token", body: #"{"user_id": "eve"}"#).reply.expectError(404, code: 16)
        }
    }

    @Test("with --demo, / is the page and every file it loads is served with its type")
    func servesThePage() async throws {
        try await TestServer.run(demo: true) { server in
            let page = try await plain(server, .get, "/")
            #expect(page.reply.status == 200)
            #expect(page.contentType?.hasPrefix("text/html") == true)
            #expect(page.reply.body.contains(#"src="ticks-demo.js""#))
            let scripts = ["ticks-demo.js", "connection.js", "channel-model.js", "views.js"]
            for script in scripts {
                let file = try await plain(server, .get, "/" + script)
                #expect(file.reply.status == 200, "\(script)")
                #expect(file.contentType?.contains("javascript") == true, "\(script): \(file.contentType ?? "none")")
                // Every module a script imports is one of the served scripts.
                for imported in file.reply.body.matches(of: /from "\.\/([a-z-]+\.js)"/).map({ String($0.1) }) {
                    #expect(scripts.contains(imported), "\(script) imports \(imported)")
                }
            }
            let style = try await plain(server, .get, "/ticks-demo.css")
            #expect(style.reply.status == 200 && style.contentType?.hasPrefix("text/css") == true)
            // The API is unchanged: still a token and an api_key.
            try await plain(server, .post, "/channels", body: "{}").reply.expectError(401, code: 5)
        }
    }

    @Test("no file outside the page's folder is served")
    func noEscape() async throws {
        try await TestServer.run(demo: true) { server in
            for path in ["/../Package.swift", "/%2e%2e/%2e%2e/Package.swift", "/..%2fDemoController.swift"] {
                let reply = try await plain(server, .get, path).reply
                #expect((400..<500).contains(reply.status), "\(path): \(reply.status) \(reply.body.prefix(80))")
            }
        }
    }

    @Test("/demo/token gives a user token that acts as that user and no one else")
    func token() async throws {
        try await TestServer.run(demo: true) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:ab", members: ["alice", "bob"])
            try await server.createChannel("messaging:b", members: ["bob"])
            let answer = try await plain(server, .post, "/demo/token", body: #"{"user_id": "alice"}"#).reply
            #expect(answer.status == 200)
            let json = try answer.json()
            #expect(json["api_key"].string == TestKeys.apiKey)
            #expect(json["user_id"].string == "alice")
            let token = try #require(json["token"].string)
            #expect(try await server.services.authority.principal(for: token) == .user("alice"))
            // It expires: a demo page signs in again rather than holding a token forever.
            let expiry = try #require(try claims(of: token)["exp"].double)
            #expect(abs(expiry - Date().addingTimeInterval(DemoController.tokenLifetime).timeIntervalSince1970) < 60)

            try await server.ok(.post, "/channels/messaging/ab/read", "{}", token: token)
            try await server.call(.post, "/channels/messaging/ab/read", body: #"{"user_id": "bob"}"#, token: token)
                .expectError(403, code: 17)
            try await server.call(.post, "/channels/messaging/b/query", body: "{}", token: token)
                .expectError(403, code: 17)
        }
    }

    @Test(
        "/demo/token refuses bad input with Stream's errors and keeps serving",
        arguments: [
            (#"{"user_id": "not valid!"}"#, 400, 4), (#"{"user_id": ""}"#, 400, 4), ("{}", 400, 4),
            (#"{"user_id": 7}"#, 400, 4), ("{", 400, 4),
            (#"{"user_id": "\#(String(repeating: "a", count: 256))"}"#, 400, 4),
            (#"{"user_id": "\#(String(repeating: "a", count: 1 << 20))"}"#, 413, 22),
        ])
    func badInput(body: String, status: Int, code: Int) async throws {
        try await TestServer.run(demo: true) { server in
            try await plain(server, .post, "/demo/token", body: body).reply.expectError(status, code: code)
            #expect(try await plain(server, .get, "/health").reply.status == 200)
        }
    }
}
