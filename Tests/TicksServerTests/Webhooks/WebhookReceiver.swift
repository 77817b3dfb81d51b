import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing
import TicksTestSupport

@testable import TicksServer

/// A real HTTP receiver for the webhook tests: records every call and
/// answers as its `answer` says (status, and whether to hold the answer
/// until the test calls `release()`).
final class WebhookReceiver: Sendable {
    struct Call: Sendable {
        var path: String
        /// The request's query, as sent (nil for none).
        var query: String? = nil
        var headers: HTTPFields
        var body: Data
        var status: Int

        var deliveryID: String { headers[HTTPField.Name("X-Webhook-Id")!] ?? "" }
        var attempt: Int { Int(headers[HTTPField.Name("X-Webhook-Attempt")!] ?? "") ?? 0 }
        var json: JSON { (try? JSON(parsing: String(decoding: body, as: UTF8.self))) ?? JSON(nil) }
        var type: String { json["type"].string ?? "" }
        var delivered: Bool { (200..<300).contains(status) }
    }

    /// How to answer a call: its path, X-Webhook-Attempt and body; `held`
    /// answers only once the test calls `release()`.
    typealias Answer =
        @Sendable (_ path: String, _ attempt: Int, _ body: JSON) -> (status: HTTPResponse.Status, held: Bool)

    private let calls = Mutex<[Call]>([])
    private let arrivals = Mutex<[Call]>([])
    /// Released or not, and the held answers waiting for the release.
    private let gate = Mutex<(released: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))
    private let answer = Mutex<Answer>({ _, _, _ in (.ok, false) })

    func answer(with answer: @escaping Answer) {
        self.answer.withLock { $0 = answer }
    }

    /// The calls answered, in the order their answers were finished.
    var received: [Call] { calls.withLock { $0 } }

    /// Every call as it arrived, answered or not yet (its status is the answer it will get).
    var arrived: [Call] { arrivals.withLock { $0 } }

    /// Lets every held answer go, now and from now on.
    func release() {
        let waiting = gate.withLock { gate in
            gate.released = true
            defer { gate.waiting = [] }
            return gate.waiting
        }
        for answer in waiting { answer.resume() }
    }

    /// Returns once `release()` has been called (at once if it has).
    private func released() async {
        await withCheckedContinuation { continuation in
            let now = gate.withLock { gate in
                if gate.released { return true }
                gate.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// The calls delivered (answered 2xx), each delivery id once, in the order they arrived.
    var delivered: [Call] {
        var seen = Set<String>()
        return received.filter { $0.delivered && seen.insert($0.deliveryID).inserted }
    }

    /// Waits until `condition` holds of the answered calls (or of the
    /// arrived ones), failing after a minute: a loaded machine is slow, and
    /// no test asserts how fast.
    func wait(
        for what: String, arrived: Bool = false, sourceLocation: SourceLocation = #_sourceLocation,
        until condition: @Sendable ([Call]) -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + Patience.wait
        while ContinuousClock.now < deadline {
            if condition(arrived ? self.arrived : received) { return }
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
            let (status, held) = self.answer.withLock { $0 }(request.uri.path, attempt, json)
            let call = Call(
                path: request.uri.path, query: request.uri.query, headers: request.headers, body: data,
                status: Int(status.code))
            self.arrivals.withLock { $0.append(call) }
            if held { await self.released() }
            self.calls.withLock { $0.append(call) }
            return Response(status: status)
        }
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        return try await application.test(.live) { client in
            try await body(URL(string: "http://127.0.0.1:\(client.port!)")!)
        }
    }
}
