import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

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
                // API v2's path, where served, as its own operation (operationIds are unique in a document).
                let v2 = endpoint.v2Path.map { document["paths"][$0][endpoint.method.rawValue.lowercased()] }
                #expect(v2?["operationId"].string == endpoint.v2Path.map { _ in endpoint.rawValue + "V2" })
            }
            #expect(names.count == APIEndpoint.allCases.count)
            // No v2 path that the server does not serve.
            let served = Set(APIEndpoint.allCases.flatMap(\.paths))
            #expect(document["paths"].keys.subtracting(served).isEmpty, "\(document["paths"].keys.subtracting(served))")
        }
    }

    /// The document as it is in the resource bundle.
    static func document() throws -> JSON {
        let contents = try #require(OpenAPIDocument.contents)
        return try JSON(parsing: String(buffer: contents))
    }

    @Test("each id schema states its Swift rule: the same pattern and maxLength")
    func idSchemasAreTheServerRules() throws {
        let schemas = try Self.document()["components"]["schemas"]
        for rule in Identifier.rules {
            let schema = schemas[rule.schema]
            #expect(schema["type"].string == "string", "\(rule.schema)")
            #expect(schema["pattern"].string == rule.pattern, "\(rule.schema)")
            #expect(schema["maxLength"].int == rule.maxLength, "\(rule.schema)")
        }
    }

    @Test("every id pattern in the document, inline ones included, is one of the Swift rules'")
    func everyIDPatternIsARule() throws {
        // Channel type names and delivery ids have the same rule.
        let rules = Dictionary(Identifier.rules.map { ($0.pattern, $0) }) { first, _ in first }
        var found = 0
        func walk(_ node: JSONValue?, at path: String) {
            switch node {
            case .object(let object):
                if case .string(let pattern)? = object["pattern"], pattern.hasPrefix("^[a-zA-Z0-9") {
                    found += 1
                    let rule = rules[pattern]
                    #expect(rule != nil, "\(path): pattern \(pattern) is not a Swift rule's")
                    if let rule, case .int(let maxLength)? = object["maxLength"] {
                        #expect(Int(maxLength) == rule.maxLength, "\(path): maxLength \(maxLength), not \(rule.maxLength)")
                    } else {
                        Issue.record("\(path): an id pattern without maxLength")
                    }
                }
                for (key, value) in object { walk(value, at: path + "/" + key) }
            case .array(let array):
                for (index, value) in array.enumerated() { walk(value, at: path + "/\(index)") }
            default: break
            }
        }
        walk(try Self.document().value, at: "#")
        #expect(found > Identifier.rules.count, "the walk found the inline path parameters' patterns too")
    }

    /// Texts on both sides of every rule: every string of up to 3 characters
    /// of an alphabet with a character of each class, the rules' separators
    /// and hostile ones (U+0000, controls, a Cyrillic look-alike, a full-width
    /// letter, a zero-width joiner, an accent that combines); and each rule's
    /// longest id and one more character.
    static func samples() -> [String] {
        let alphabet: [String] = [
            "a", "Z", "0", "@", "_", "-", "!", ":", " ", "\u{0}", "\u{1F}", "\u{7F}", "а", "ａ", "\u{200D}",
            "\u{301}", "é", "\n",
        ]
        var texts = [""]
        var layer = [""]
        for _ in 1...3 {
            layer = layer.flatMap { prefix in alphabet.map { prefix + $0 } }
            texts += layer
        }
        for rule in Identifier.rules {
            for length in [rule.maxLength - 1, rule.maxLength, rule.maxLength + 1] {
                texts.append(String(repeating: "a", count: length))
                texts.append("messaging:" + String(repeating: "a", count: length - 10))
                texts.append(String(repeating: "a", count: length - 1) + "\u{0}")
            }
        }
        return texts
    }

    @Test("each rule accepts exactly what its pattern matches (as JSON Schema reads a pattern)")
    func rulesAreTheirPatterns() throws {
        for rule in Identifier.rules {
            // JSON Schema's `$` is the end of the text (ECMA 262), not "before a final newline": match the
            // pattern without its anchors against the whole text, scalar by scalar.
            let body = String(rule.pattern.dropFirst().dropLast())
            let regex = try Regex(body).matchingSemantics(.unicodeScalar)
            for text in Self.samples() {
                let matches = (try? regex.wholeMatch(in: text)) != nil
                #expect(rule.isValid(text) == matches, "\(rule.schema): \(text.debugDescription)")
            }
        }
    }
}
