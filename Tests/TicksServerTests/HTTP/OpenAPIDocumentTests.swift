import Foundation
import Testing

@testable import TicksServer

/// The OpenAPI document the server serves names every endpoint the router
/// serves, as `APIEndpoint` lists them: a new endpoint left out of it would
/// leave the fuzzer blind to it and fail the answers of GET /app.
@Suite("The OpenAPI document")
struct OpenAPIDocumentTests {
    @Test("every endpoint is an operation at its path and method, and an EndpointName")
    func everyEndpoint() async throws {
        try await TestServer.run { server in
            let document = try await server.ok(.get, "/openapi.json")
            let names = Set(document["components"]["schemas"]["EndpointName"]["enum"].array.compactMap(\.string))
            for endpoint in APIEndpoint.allCases {
                #expect(names.contains(endpoint.rawValue), "EndpointName lacks \(endpoint.rawValue)")
                let operation = document["paths"][endpoint.path][endpoint.method.rawValue.lowercased()]
                #expect(operation["operationId"].string == endpoint.rawValue, "\(endpoint.method) \(endpoint.path)")
            }
            #expect(names.count == APIEndpoint.allCases.count)
        }
    }
}
