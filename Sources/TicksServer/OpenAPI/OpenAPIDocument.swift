import Foundation
import Hummingbird
import Logging
import NIOCore

/// `GET /openapi.json`: the OpenAPI 3.1 document of every endpoint, the
/// reference users read and the fuzzer's input. Kept in the repository next
/// to this file and copied into the resource bundle by SwiftPM.
struct OpenAPIDocument {
    let logger: Logger

    /// The document's bytes; nil when the resource bundle lacks it.
    static let contents: ByteBuffer? = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json"),
            let data = try? Data(contentsOf: url)
        else { return nil }
        return ByteBuffer(bytes: data)
    }()

    func addRoutes(to router: Router<TicksRequestContext>) {
        guard let contents = Self.contents else {
            logger.error("the OpenAPI document is missing from the resource bundle; GET /openapi.json answers 404")
            return
        }
        router.on(.openAPI) { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: contents))
        }
    }
}
