import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// A plain TCP connection to a live test server.
final class RawConnection {
    let descriptor: Int32

    /// - Parameter receiveBufferBytes: shrinks the socket's receive buffer (a client that reads slowly).
    init(port: Int, receiveBufferBytes: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        if var size = receiveBufferBytes {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)
    }

    /// False when the peer has gone.
    func send(_ bytes: [UInt8]) -> Bool {
        Glibc.send(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count
    }

    /// What arrives until `responses` whole HTTP responses have (or the
    /// server closes the connection), waiting up to `timeout`: a deadline for
    /// answers that never come, not a pause that ends one (a loaded machine
    /// can pause anywhere in an answer).
    func read(within timeout: Duration, responses: Int = 1) async -> String {
        String(decoding: await bytes(until: { Self.wholeResponses(in: $0) >= responses }, within: timeout), as: UTF8.self)
    }

    /// How many whole HTTP responses `bytes` begins with (a body's end is
    /// known from Content-Length, or the last chunk; a head without either has none).
    static func wholeResponses(in bytes: [UInt8]) -> Int {
        var count = 0
        var rest = bytes[...]
        while let headEnd = rest.firstRange(of: Array("\r\n\r\n".utf8)) {
            let head = String(decoding: rest[..<headEnd.lowerBound], as: UTF8.self).lowercased()
            let fields = head.split(separator: "\r\n")
            var bodyEnd = headEnd.upperBound
            if let field = fields.first(where: { $0.hasPrefix("content-length:") }),
                let length = Int(field.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
            {
                guard rest.distance(from: headEnd.upperBound, to: rest.endIndex) >= length else { break }
                bodyEnd = rest.index(headEnd.upperBound, offsetBy: length)
            } else if fields.contains(where: { $0.hasPrefix("transfer-encoding:") && $0.contains("chunked") }) {
                guard let last = rest[headEnd.upperBound...].firstRange(of: Array("0\r\n\r\n".utf8)) else { break }
                bodyEnd = last.upperBound
            }
            count += 1
            rest = rest[bodyEnd...]
        }
        return count
    }

    /// Whether the server closes the connection within `timeout` (anything it sends first is read and dropped).
    func waitForClose(within timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let chunk = readChunk(), chunk.isEmpty { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return false
    }

    /// The bytes that arrive until `done` holds for them all, the server closes, or `timeout` passes.
    func readBytes(until done: ([UInt8]) -> Bool, within timeout: Duration) async -> [UInt8] {
        await bytes(until: done, within: timeout)
    }

    /// What arrives until `done` holds for all of it, or the server closes the
    /// connection, waiting up to `timeout`: a deadline, never a pause that ends
    /// the answer (a loaded machine can pause anywhere in one).
    func read(until done: (String) -> Bool, within timeout: Duration) async -> String {
        String(decoding: await bytes(until: { done(String(decoding: $0, as: UTF8.self)) }, within: timeout), as: UTF8.self)
    }

    /// The bytes that arrive until `done` holds for them all, the server closes, or `timeout` passes.
    ///
    /// Polls without blocking and sleeps between polls: a blocking wait would
    /// hold one of the few threads the server under test needs to answer.
    private func bytes(until done: ([UInt8]) -> Bool, within timeout: Duration) async -> [UInt8] {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, !done(received) {
            if let chunk = readChunk() {
                if chunk.isEmpty { break }
                received += chunk
            } else {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        return received
    }

    /// Bytes read; empty at end of stream (or a reset); nil when nothing is there yet.
    private func readChunk() -> [UInt8]? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 0) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(descriptor, &buffer, buffer.count)
        return count <= 0 ? [] : Array(buffer[..<count])
    }

    func close() {
        _ = Glibc.close(descriptor)
    }
}

extension RawConnection {
    /// The bytes of `GET /connect` as a client sends it, asking to upgrade to a WebSocket.
    static func connectRequest(userID: String, token: String) -> [UInt8] {
        let json = #"{"user_id": "\#(userID)"}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let request = """
            GET /connect?api_key=\(TestKeys.apiKey)&authorization=\(token)&json=\(json) HTTP/1.1\r
            Host: 127.0.0.1\r
            Upgrade: websocket\r
            Connection: Upgrade\r
            Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r
            Sec-WebSocket-Version: 13\r
            \r

            """
        return Array(request.utf8)
    }
}
