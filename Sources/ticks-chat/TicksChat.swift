import ArgumentParser
import Foundation
import Logging
import TicksClient

/// A terminal chat client on TicksClient: each own message ends with its
/// read indicator, updated live as receipts arrive.
@main
struct TicksChat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ticks-chat",
        abstract: "Chat on a Ticks server: your channels with unread badges, live ✓ / ✓✓ / blue ✓✓ read indicators.",
        discussion: """
            Starts on your channel list (or in --channel). In the list: /open N or /open TYPE:ID opens a \
            channel, /more loads more channels, /readall marks every channel read. In a channel: type a line \
            to send it; /list goes back, /older loads older messages, /receipts N shows who read or received \
            message N and when, /resend [N] sends failed messages again. Anywhere: /privacy [read on|off] \
            [delivery on|off] shows or sets who sees your receipts, /help, /quit. What you saw stays on the \
            device: offline, the list and channels show from it, and what you write is sent when the server is back.
            """)

    @Option(help: "The Ticks server, e.g. http://127.0.0.1:3030.") var url: String
    @Option(name: .customLong("api-key"), help: "The app's API key.") var apiKey: String
    @Option(help: "A user token (`ticks token USER_ID`).") var token: String
    @Option(help: "A channel to open at start, TYPE:ID, e.g. messaging:trip (default: the channel list).")
    var channel: String?
    @Option(help: "The user id (default: the token's user_id).") var user: String?
    @Option(help: "Where unsent messages and the channel cache are kept (default: .ticks-chat/USER-outbox.sqlite).")
    var outbox: String?
    @Flag(name: .customLong("no-color"), help: "No ANSI colours.") var noColor = false

    func run() async throws {
        let cid = try channel.map { name in
            guard let cid = ChannelID(cid: name) else {
                throw ValidationError("--channel must be TYPE:ID, e.g. messaging:trip")
            }
            return cid
        }
        guard let baseURL = URL(string: url), baseURL.scheme?.hasPrefix("http") == true else {
            throw ValidationError("--url must be an http(s) URL, e.g. http://127.0.0.1:3030")
        }
        guard let userID = user ?? Self.userID(inToken: token) else {
            throw ValidationError("the token names no user_id; give --user")
        }
        let outboxURL = URL(fileURLWithPath: outbox ?? ".ticks-chat/\(userID)-outbox.sqlite")
        let interactive = Terminal.isInteractive

        var configuration = ChatClientConfiguration(baseURL: baseURL, apiKey: apiKey, outbox: .file(outboxURL))
        configuration.resendsFailedOnReconnect = true
        var logger = Logger(label: "ticks-chat")
        // On a full screen, log lines would scribble over it.
        logger.logLevel = interactive ? .critical : .warning
        configuration.logger = logger
        let client = try ChatClient(configuration: configuration)
        do {
            try await client.connect(userID: userID, token: token)
        } catch {
            throw ValidationError("could not connect: \(error)")
        }
        let app = ChatScreen(
            client: client, list: await client.channels(), userID: userID,
            renderer: Renderer(colors: !noColor && ProcessInfo.processInfo.environment["NO_COLOR"] == nil),
            terminal: interactive ? Terminal() : nil)
        await app.run(opening: cid)
        await client.disconnect()
    }

    /// The `user_id` claim of a JWT (not verified: the server does that).
    static func userID(inToken token: String) -> String? {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var payload = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
        guard let data = Data(base64Encoded: payload),
            let claims = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return claims["user_id"] as? String
    }
}
