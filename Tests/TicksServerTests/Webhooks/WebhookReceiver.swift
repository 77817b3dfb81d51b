import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing

@testable import TicksServer

/// A real HTTP receiver for the webhook tests: records every call and
/// answers as its `answer` says (status, and how long to wait first).
final class WebhookReceiver: Sendable {
    struct Call: Sendable {
        var path: String
        var headers: HTTPFields
        var body: Data
        var status: Int

        var deliveryID: String { headers[HTTPField.Name("X-Webhook-Id")!] ?? "" }
        var attempt: Int { Int(headers[HTTPField.Name("X-Webhook-Attempt")!] ?? "") ?? 0 }
        var json: JSON { (try? JSON(parsing: String(decoding: body, as: UTF8.self))) ?? JSON(nil) }
        var type: String { json["type"].string ?? "" }
        var delivered: Bool { (200..<300).contains(status) }
    }

    /// How to answer a call: its path, X-Webhook-Attempt and body.
    typealias Answer =
        @Sendable (_ path: String, _ attempt: Int, _ body: JSON) -> (status: HTTPResponse.Status, delay: Duration)

    private let calls = Mutex<[Call]>([])
    private let answer = Mutex<Answer>({ _, _, _ in (.ok, .zero) })

    func answer(with answer: @escaping Answer) {
        self.answer.withLock { $0 = answer }
    }

    var received: [Call] { calls.withLock { $0 } }

    /// The calls delivered (answered 2xx), each delivery id once, in the order they arrived.
    var delivered: [Call] {
        var seen = Set<String>()
        return received.filter { $0.delivered && seen.insert($0.deliveryID).inserted }
    }

    /// Waits until `condition` holds of the calls (10 s at most).
    func wait(
        for what: String, sourceLocation: SourceLocation = #_sourceLocation,
        until condition: @Sendable ([Call]) -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if condition(received) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record(
            "timed out waiting for \(what); received \(received.map { "\($0.path) \($0.type) \($0.status)" })",
            sourceLocation: sourceLocation)
        throw CancellationError()
    }

    /// Runs the receiver on a loopback port for `body`, which gets its base URL.
    func run<Value: Sendable>(_ body: @Sendable (URL) async throws -> Value) async throws -> Value {
        let router = Router()
        router.post("**") { request, context -> Response in
            let buffer = try await request.body.collect(upTo: 4 << 20)
            let data = Data(buffer: buffer)
            let json = (try? JSON(parsing: String(decoding: data, as: UTF8.self))) ?? JSON(nil)
            let attempt = Int(request.headers[HTTPField.Name("X-Webhook-Attempt")!] ?? "") ?? 0
            let (status, delay) = self.answer.withLock { $0 }(request.uri.path, attempt, json)
            if delay > .zero { try await Task.sleep(for: delay) }
            self.calls.withLock {
                $0.append(Call(path: request.uri.path, headers: request.headers, body: data, status: Int(status.code)))
            }
            return Response(status: status)
        }
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        return try await application.test(.live) { client in
            try await body(URL(string: "http://127.0.0.1:\(client.port!)")!)
        }
    }
}
