#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import TicksClient

/// What ticks-chat shows and does: the channel list (unread badges, the
/// user's totals) or one channel's lines, the connection status, command
/// output, and what the user types.
actor ChatScreen {
    enum View {
        case list
        case channel(ChannelController, ReadTracker)
    }

    let client: ChatClient
    let list: ChannelListController
    let userID: String
    let renderer: Renderer
    /// Nil in log mode (not a terminal): lines are printed as they change.
    let terminal: Terminal?

    private var view: View = .list
    private var listState: ChatChannelList?
    private var channelState: ChatChannel?
    private var channelUpdates: Task<Void, Never>?
    private var status: ConnectionStatus = .connecting
    private var info: [String] = []
    private var input: [UInt8] = []
    /// Log mode: the last line printed for each message id or list row.
    private var printed: [String: String] = [:]
    private var printedTotals: String?
    private var done = false

    init(client: ChatClient, list: ChannelListController, userID: String, renderer: Renderer, terminal: Terminal?) {
        self.client = client
        self.list = list
        self.userID = userID
        self.renderer = renderer
        self.terminal = terminal
    }

    /// Runs until /quit, Ctrl-C or the end of input, starting in `channel` if given, else in the list.
    func run(opening channel: ChannelID?) async {
        terminal?.enableRawMode()
        defer { terminal?.restore() }
        let rows = await list.updates()
        let statuses = await client.connectionStatuses()
        let keys = Self.readInput(raw: terminal != nil)
        if let channel { await open(channel) }
        // Offline at start is fine: the list shows what the cache kept, and loads when the connection comes.
        Task { try? await self.list.load() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { for await state in rows { await self.show(state) } }
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
        await closeChannel()
    }

    private func finish() {
        done = true
    }

    // MARK: Views

    private func open(_ cid: ChannelID) async {
        await closeChannel()
        let controller = await client.channel(cid)
        let tracker = ReadTracker(channel: controller)
        await tracker.setAtBottom(true)
        await tracker.setAppActive(true)
        view = .channel(controller, tracker)
        channelState = nil
        printed = [:]
        let updates = await controller.updates()
        channelUpdates = Task {
            for await state in updates { await self.show(state) }
        }
        if terminal == nil { emit("-- \(cid) --") }
        redraw()
        do {
            try await controller.load()
        } catch {
            say(["could not load \(cid): \(error)"])
        }
    }

    private func closeChannel() async {
        channelUpdates?.cancel()
        channelUpdates = nil
        if case .channel(_, let tracker) = view { await tracker.stop() }
        view = .list
        channelState = nil
        printed = [:]
        printedTotals = nil
    }

    // MARK: Showing

    private func show(_ new: ChatChannel) async {
        guard case .channel(let controller, let tracker) = view, controller.cid == new.cid else { return }
        channelState = new
        redraw()
        // What is on the screen is read (the newest lines that fit; all of them in log mode).
        let rows = terminal.map { max($0.size.rows - 2 - min(info.count, 8), 1) } ?? new.messages.count
        await tracker.setVisibleMessages(new.messages.suffix(rows).map(\.id))
    }

    private func show(_ new: ChatChannelList) {
        listState = new
        redraw()
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
        let totals = listState.map { ChatUnreadTotals(totalUnreadCount: $0.totalUnreadCount, unreadChannels: $0.unreadChannels) }
        let unread = totals.map(renderer.totals) ?? ""
        if let terminal {
            let header: String
            let lines: [String]
            switch view {
            case .list:
                header = "ticks-chat  \(userID)  [\(renderer.status(status))]  \(unread)"
                lines = listState.map { renderer.lines(of: $0, userID: userID) } ?? ["loading…"]
            case .channel(let controller, _):
                header = "ticks-chat  \(controller.cid) as \(userID)  [\(renderer.status(status))]  \(unread)  /list"
                lines = channelState.map(renderer.lines(of:)) ?? []
            }
            terminal.draw(header: header, messages: lines, info: info, input: String(decoding: input, as: UTF8.self))
            return
        }
        if unread != printedTotals, !unread.isEmpty {
            printedTotals = unread
            emit("-- \(unread) --")
        }
        switch view {
        case .list:
            guard let listState else { return }
            for (row, line) in zip(listState.channels, renderer.lines(of: listState, userID: userID))
            where printed[row.cid.rawValue] != line {
                printed[row.cid.rawValue] = line
                emit(line)
            }
        case .channel:
            guard let channelState else { return }
            for (message, line) in zip(channelState.messages, renderer.lines(of: channelState))
            where printed[message.id] != line {
                printed[message.id] = line
                emit(line)
            }
        }
    }

    private func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
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
        guard case .channel(let controller, _) = view else {
            say(["open a channel first: /open N (the number in [brackets]) or /open TYPE:ID"])
            return
        }
        do {
            try await controller.send(text)
        } catch {
            say(["could not send: \(error)"])
        }
    }

    static let help = [
        "in the list: /open N or /open TYPE:ID, /more, /readall, /readthreads",
        "in a channel: /list, /older, /receipts N, /play N, /resend [N], /why (the unread count explained)",
        "anywhere: /privacy [read on|off] [delivery on|off], /quit",
    ]

    private func command(_ text: String) async {
        let words = text.split(separator: " ").map(String.init)
        switch words[0] {
        case "/quit", "/exit":
            done = true
        case "/help":
            say(Self.help)
        case "/open":
            guard words.count > 1, let cid = channel(named: words[1]) else {
                say(["usage: /open N (the number in [brackets]) or /open TYPE:ID"])
                return
            }
            await open(cid)
        case "/list", "/back":
            await closeChannel()
            redraw()
        case "/more":
            do {
                try await list.loadMore()
            } catch {
                say(["could not load more channels: \(error)"])
            }
        case "/readall":
            do {
                try await client.markAllRead()
                say(["every channel marked read"])
            } catch {
                say(["could not mark all read: \(error)"])
            }
        case "/readthreads":
            do {
                let marked = try await client.markAllThreadsRead()
                say(["\(marked) thread\(marked == 1 ? "" : "s") marked read"])
            } catch {
                say(["could not mark threads read: \(error)"])
            }
        case "/why":
            guard case .channel(let controller, _) = view else { return say(["/why works in a channel"]) }
            let shown = channelState?.messages ?? []
            let numbers = Dictionary(shown.enumerated().map { ($1.id, $0 + 1) }, uniquingKeysWith: { first, _ in first })
            do {
                say(renderer.unread(try await client.explainUnread(controller.cid), numbers: numbers))
            } catch {
                say(["could not explain the unread count: \(error)"])
            }
        case "/privacy":
            await privacy(Array(words.dropFirst()))
        case "/older":
            guard case .channel(let controller, _) = view else { return say(["/older works in a channel"]) }
            do {
                let added = try await controller.loadOlder()
                say([added == 0 ? "this is the beginning of the channel" : "\(added) older messages"])
            } catch {
                say(["could not load older messages: \(error)"])
            }
        case "/resend":
            let failed = (channelState?.messages ?? []).enumerated().filter {
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
            guard words.count > 1, let number = Int(words[1]), let messages = channelState?.messages,
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
        case "/play":
            // R14: the user played a voice note or video (ticks-chat plays nothing itself).
            guard words.count > 1, let number = Int(words[1]), let messages = channelState?.messages,
                messages.indices.contains(number - 1)
            else {
                say(["usage: /play N, N the number in [brackets] of a voice note or video"])
                return
            }
            do {
                try await client.markPlayed(messageId: messages[number - 1].id)
                say(["played [\(number)]"])
            } catch {
                say(["could not mark played: \(error)"])
            }
        default:
            say(["unknown command \(words[0]); try /help"])
        }
    }

    /// A channel by its number in the list, or its cid.
    private func channel(named name: String) -> ChannelID? {
        if let number = Int(name), let rows = listState?.channels, rows.indices.contains(number - 1) {
            return rows[number - 1].cid
        }
        return ChannelID(cid: name)
    }

    /// `/privacy` shows the settings; `/privacy read off delivery on` changes them (R10).
    private func privacy(_ words: [String]) async {
        var (read, delivery) = await client.receiptPrivacy
        guard !words.isEmpty else {
            say(["read receipts \(read ? "on" : "off"), delivery receipts \(delivery ? "on" : "off")"])
            return
        }
        var index = 0
        while index + 1 < words.count {
            let on = words[index + 1] == "on"
            guard on || words[index + 1] == "off" else { break }
            switch words[index] {
            case "read": read = on
            case "delivery": delivery = on
            default: return say(["usage: /privacy [read on|off] [delivery on|off]"])
            }
            index += 2
        }
        guard index == words.count else { return say(["usage: /privacy [read on|off] [delivery on|off]"]) }
        do {
            try await client.setReceiptPrivacy(read: read, delivery: delivery)
            say(["read receipts \(read ? "on" : "off"), delivery receipts \(delivery ? "on" : "off")"])
        } catch {
            say(["could not change privacy: \(error)"])
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
