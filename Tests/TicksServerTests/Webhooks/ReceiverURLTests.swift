import Foundation
import Testing

@testable import TicksServer

/// What a log may say of a receiver's URL, and what goes on the wire (docs/webhooks.md, "The call").
@Suite("Receiver URLs")
struct ReceiverURLTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var url: String
        var redacted: String
        var requestURL: String
        var credentials: String?
        var testDescription: String { url }
    }

    static let cases: [Case] = [
        Case(
            url: "https://hooks.example/ticks", redacted: "https://hooks.example/ticks",
            requestURL: "https://hooks.example/ticks", credentials: nil),
        Case(
            url: "http://user:pa%24%24@127.0.0.1:8080/in?token=secret&x=1", redacted: "http://127.0.0.1:8080/in",
            requestURL: "http://127.0.0.1:8080/in?token=secret&x=1", credentials: "user:pa$$"),
        Case(
            url: "https://only-user@hooks.example:8443", redacted: "https://hooks.example:8443",
            requestURL: "https://hooks.example:8443", credentials: "only-user:"),
        Case(
            url: "https://:secret@hooks.example/a%20b?q", redacted: "https://hooks.example/a%20b",
            requestURL: "https://hooks.example/a%20b?q", credentials: ":secret"),
        Case(url: "not a url at all", redacted: "(a URL that could not be read)", requestURL: "not a url at all", credentials: nil),
    ]

    @Test("logs get scheme, host, port and path; the wire gets the user information as Basic authentication", arguments: cases)
    func receiverURL(_ example: Case) {
        let receiver = ReceiverURL(example.url)
        #expect(receiver.redacted == example.redacted)
        #expect(receiver.requestURL == example.requestURL)
        #expect(receiver.authorization == example.credentials.map { "Basic " + Data($0.utf8).base64EncodedString() })
    }

    @Test("a URL refused at start is named without its secrets")
    func refusedURL() {
        #expect(throws: WebhookSettingsError.badURL("ftp://files.example/in")) {
            try WebhookSettings.url(parsing: "ftp://user:secret@files.example/in?key=secret")
        }
    }
}
