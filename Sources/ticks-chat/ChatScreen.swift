#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import TicksClient

/// What ticks-chat shows and does: the channel's lines, the connection
/// status, command output, and what the user types.
actor ChatScreen {
    let client: ChatClient
    let channel: ChannelController
    let userID: String
    let renderer: Renderer
    /// Nil in log mode (not a terminal): lines are printed as they change.
    let terminal: Terminal?

    private var state: ChatChannel?
    private var status: ConnectionStatus = .connecting
    private var info: [String] = []
    private var input: [UInt8] = []
    /// Log mode: the last line printed for each message id.
    private var printed: [String: String] = [:]
    private var markingRead = false
    private var done = false

    init(client: ChatClient, channel: ChannelController, userID: String, renderer: Renderer, terminal: Terminal?) {
        self.client = client
        self.channel = channel
        self.userID = userID
        self.renderer = renderer
        self.terminal = terminal
    }

    /// Runs until /quit, Ctrl-C or the end of input.
    func run() async {
        terminal?.enableRawMode()
        defer { terminal?.restore() }
        let updates = await channel.updates()
        let statuses = await client.connectionStatuses()
        let keys = Self.readInput(raw: terminal != nil)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { for await state in updates { await self.show(state) } }
            group.addTask { for await status in statuses { await self.show(status) } }
            group.addTask {
                for await chunk in keys {
                    await self.typed(chunk)
                    if await self.done { break }
                }
                await self.finish()
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func finish() {
        done = true
    }

    // MARK: Showing

    private func show(_ new: ChatChannel) async {
        state = new
        redraw()
        await markReadIfNeeded(new)
    }

    private func show(_ new: ConnectionStatus) {
        guard new != status else { return }
        status = new
        if terminal == nil { emit("-- \(renderer.status(new)) --") }
        redraw()
    }

    private func say(_ lines: [String]) {
        info = Array((info + lines).suffix(8))
        if terminal == nil {
            for line in lines { emit(line) }
        }
        redraw()
    }

    private func redraw() {
        let lines = state.map(renderer.lines(of:)) ?? []
        if let terminal {
            let header = "ticks-chat  \(channel.cid) as \(userID)  [\(renderer.status(status))]"
            terminal.draw(
                header: header, messages: lines, info: info, input: String(decoding: input, as: UTF8.self))
            return
        }
        guard let state else { return }
        for (message, line) in zip(state.messages, lines) where printed[message.id] != line {
            printed[message.id] = line
            emit(line)
        }
    }

    private func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// The user is looking at the channel: what others wrote is read.
    private func markReadIfNeeded(_ state: ChatChannel) async {
        guard !markingRead, status.isConnected, state.isLoaded, state.unreadCount > 0 else { return }
        markingRead = true
        defer { markingRead = false }
        try? await channel.markRead()
    }

    // MARK: Input

    private func typed(_ chunk: [UInt8]) async {
        guard terminal != nil else {
            await submit(String(decoding: chunk, as: UTF8.self))
            return
        }
        var index = 0
        while index < chunk.count {
            let byte = chunk[index]
            index += 1
            switch byte {
            case 13, 10:
                let line = String(decoding: input, as: UTF8.self)
                input = []
                await submit(line)
            case 127, 8:
                // Drop the last character, whatever its length in UTF-8.
                var text = String(decoding: input, as: UTF8.self)
                if !text.isEmpty { text.removeLast() }
                input = Array(text.utf8)
            case 3, 4:
                done = true
                return
            case 27:
                // An escape sequence (arrow keys): skip it.
                if index < chunk.count, chunk[index] == UInt8(ascii: "[") { index += 2 }
            default:
                if byte >= 32 { input.append(byte) }
            }
        }
        redraw()
    }

    private func submit(_ line: String) async {
        let text = line.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return }
        if text.hasPrefix("/") {
            await command(text)
            return
        }
        do {
            try await channel.send(text)
        } catch {
            say(["could not send: \(error)"])
        }
    }

    private func command(_ text: String) async {
        let words = text.split(separator: " ").map(String.init)
        switch words[0] {
        case "/quit", "/exit":
            done = true
        case "/resend":
            let failed = (state?.messages ?? []).enumerated().filter {
                if case .failed = $0.element.localState { return true }
                return false
            }
            let chosen = words.count > 1 ? failed.filter { "\($0.offset + 1)" == words[1] } : failed
            if chosen.isEmpty { say(["nothing to resend"]) }
            for (_, message) in chosen {
                do {
                    try await client.resend(messageId: message.id)
                } catch {
                    say(["could not resend: \(error)"])
                }
            }
        case "/receipts":
            guard words.count > 1, let number = Int(words[1]), let messages = state?.messages,
                messages.indices.contains(number - 1)
            else {
                say(["usage: /receipts N, N the number in [brackets]"])
                return
            }
            do {
                say(renderer.receipts(try await client.receipts(for: messages[number - 1].id), number: number))
            } catch {
                say(["could not get receipts: \(error)"])
            }
        default:
            say(["unknown command \(words[0]); try /resend, /receipts N or /quit"])
        }
    }

    /// Standard input on a thread of its own: keystrokes in raw mode, whole
    /// lines otherwise. The stream ends at end of input.
    nonisolated static func readInput(raw: Bool) -> AsyncStream<[UInt8]> {
        AsyncStream { continuation in
            let thread = Thread {
                if raw {
                    var buffer = [UInt8](repeating: 0, count: 64)
                    while true {
                        let count = read(STDIN_FILENO, &buffer, buffer.count)
                        if count <= 0 { break }
                        continuation.yield(Array(buffer[0..<count]))
                    }
                } else {
                    while let line = readLine() { continuation.yield(Array(line.utf8)) }
                }
                continuation.finish()
            }
            thread.start()
        }
    }
}
