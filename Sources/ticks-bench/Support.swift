import AsyncHTTPClient
import Foundation
import Histogram
import JWTKit
import NIOCore
import NIOHTTP1
import Synchronization

/// JSON over HTTP for the load generator: one client with a connection pool
/// sized for the load.
struct HTTP: Sendable {
    let client: HTTPClient

    init(connections: Int) {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(30))
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    struct Failure: Error, CustomStringConvertible {
        let status: Int
        let body: String
        var description: String { "HTTP \(status): \(body.prefix(300))" }
    }

    /// Sends a request; a non-2xx answer throws. Returns the body.
    @discardableResult
    func call(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)] = [], json: String? = nil,
        timeout: Duration = .seconds(30)
    ) async throws -> ByteBuffer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await client.execute(
            request, timeout: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000))
        let body = try await response.body.collect(upTo: 64 << 20)
        guard (200..<300).contains(Int(response.status.code)) else {
            throw Failure(status: Int(response.status.code), body: String(buffer: body))
        }
        return body
    }

    func json(_ method: HTTPMethod, _ url: String, headers: [(String, String)] = [], json body: String? = nil)
        async throws -> [String: Any]
    {
        let buffer = try await call(method, url, headers: headers, json: body)
        return (try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any]) ?? [:]
    }

    func shutdown() async {
        try? await client.shutdown()
    }
}

/// Signs HS256 tokens the way `ticks token` does, from the app secret.
struct Tokens: Sendable {
    let keys: JWTKeyCollection

    init(secret: String) async {
        keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
    }

    struct Claims: JWTPayload {
        var server: Bool?
        var user_id: String?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    func user(_ id: String) async throws -> String { try await keys.sign(Claims(server: nil, user_id: id)) }
    func server() async throws -> String { try await keys.sign(Claims(server: true, user_id: nil)) }
}

/// Latencies from the moment a request starts to the moment its effect is
/// seen elsewhere, matched by key.
final class LatencyBook: Sendable {
    private struct State {
        var started: [String: ContinuousClock.Instant] = [:]
        var histogram = Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
        var seenWithoutStart = 0
    }
    private let state = Mutex(State())

    func start(_ key: String, at instant: ContinuousClock.Instant = .now) {
        state.withLock { $0.started[key] = instant }
    }

    /// The request failed: nothing will be seen for it.
    func cancel(_ key: String) {
        _ = state.withLock { $0.started.removeValue(forKey: key) }
    }

    func seen(_ key: String, at instant: ContinuousClock.Instant = .now) {
        state.withLock { state in
            guard let started = state.started.removeValue(forKey: key) else {
                state.seenWithoutStart += 1
                return
            }
            _ = state.histogram.record(UInt64(max((instant - started).microseconds, 1)))
        }
    }

    var outstanding: Int { state.withLock { $0.started.count } }
    var summary: LatencySummary { state.withLock { LatencySummary($0.histogram) } }
}

/// p50, p90, p99 and max in milliseconds.
struct LatencySummary: Codable, Sendable {
    var count: UInt64
    var p50: Double
    var p90: Double
    var p99: Double
    var max: Double

    init(_ histogram: Histogram<UInt64>) {
        count = histogram.totalCount
        func ms(_ micros: UInt64) -> Double { (Double(micros) / 1000 * 1000).rounded() / 1000 }
        p50 = count == 0 ? 0 : ms(histogram.valueAtPercentile(50))
        p90 = count == 0 ? 0 : ms(histogram.valueAtPercentile(90))
        p99 = count == 0 ? 0 : ms(histogram.valueAtPercentile(99))
        max = count == 0 ? 0 : ms(histogram.max)
    }

    var text: String { "p50 \(p50) ms, p90 \(p90) ms, p99 \(p99) ms, max \(max) ms (\(count) samples)" }
}

extension Duration {
    var microseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// Runs `body` for each element with at most `width` running at once.
func forEachConcurrently<Element: Sendable>(
    _ elements: [Element], width: Int, _ body: @escaping @Sendable (Element) async throws -> Void
) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        var iterator = elements.makeIterator()
        for _ in 0..<width {
            guard let element = iterator.next() else { break }
            group.addTask { try await body(element) }
        }
        while try await group.next() != nil {
            guard let element = iterator.next() else { continue }
            group.addTask { try await body(element) }
        }
    }
}

/// Prints the human summary to stderr when --json goes to stdout.
func report(_ lines: [String], json: (any Encodable)?, asJSON: Bool) throws {
    if asJSON, let json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        FileHandle.standardOutput.write(try encoder.encode(json) + Data("\n".utf8))
        FileHandle.standardError.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    } else {
        print(lines.joined(separator: "\n"))
    }
}

/// A fresh id prefix so runs against the same server never collide.
func runPrefix() -> String {
    "b" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
}

/// A value shared between tasks, behind a lock.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result { mutex.withLock { body(&$0) } }
}

/// Runs `op(worker, n)` for each of `workers` on a schedule of its own: its
/// ops `interval` apart from a random offset after `start`, until `end`, one
/// at a time (an op waits for the one before, as a client waits for its
/// answer), so the total is `workers / interval` per second.
func paced(
    workers: Int, interval: Duration, from start: ContinuousClock.Instant, until end: ContinuousClock.Instant,
    _ op: @escaping @Sendable (_ worker: Int, _ n: Int) async -> Void
) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for worker in 0..<workers {
            let offset = interval * Double.random(in: 0..<1)
            group.addTask {
                var n = 0
                while true {
                    let due = start + offset + interval * n
                    guard due < end else { break }
                    if due > .now { try await Task.sleep(until: due) }
                    await op(worker, n)
                    n += 1
                }
            }
        }
        try await group.waitForAll()
    }
}

/// User and system CPU of this process (the load generator), in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The CPU `root`'s process tree spent since it stood at `before` seconds (`processTreeCPUSeconds`);
/// nil without a root or a reading.
func processTreeCPUSeconds(root: Int32?, since before: Double?) -> Double? {
    guard let root, let before, let now = processTreeCPUSeconds(root: root) else { return nil }
    return now - before
}

/// User and system CPU of process `root` and every process it started, in
/// seconds, from /proc: its own, its children's that ended and were waited
/// for, and each running child's (a database's postmaster and its backends).
/// Nil where /proc does not show `root`.
func processTreeCPUSeconds(root: Int32) -> Double? {
    /// The fields after a /proc/PID/stat line's command (which may hold spaces).
    func fields(_ pid: String) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    func sum(_ fields: [Substring], _ range: Range<Int>) -> Double {
        // utime, stime (11, 12) and cutime, cstime (13, 14), counted from the state (0).
        range.reduce(0) { $0 + (fields.count > $1 ? Double(fields[$1]) ?? 0 : 0) } / ticks
    }
    guard let own = fields(String(root)) else { return nil }
    var total = sum(own, 11..<15)
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for entry in entries where entry.first?.isNumber == true && entry != String(root) {
        // A child that ends between the listing and the read is counted by `root`'s cutime next time.
        guard let child = fields(entry), child.count > 1, child[1] == String(root) else { continue }
        total += sum(child, 11..<13)
    }
    return total
}

/// CPU `seconds` spread over `count` answers, in µs each to one decimal; nil
/// when nothing was answered or the seconds are unknown.
func microsecondsEach(_ seconds: Double?, over count: Int) -> Double? {
    guard let seconds, count > 0 else { return nil }
    return (seconds / Double(count) * 1_000_000 * 10).rounded() / 10
}
