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
        abstract: "Chat in one channel of a Ticks server, with live ✓ / ✓✓ / blue ✓✓ read indicators.",
        discussion: """
            Type a line to send it. Commands: /resend [N] sends failed messages again, \
            /receipts N shows who read or received message N and when, /quit leaves.
            """)

    @Option(help: "The Ticks server, e.g. http://127.0.0.1:3030.") var url: String
    @Option(name: .customLong("api-key"), help: "The app's API key.") var apiKey: String
    @Option(help: "A user token (`ticks token USER_ID`).") var token: String
    @Option(help: "The channel, TYPE:ID, e.g. messaging:trip.") var channel: String
    @Option(help: "The user id (default: the token's user_id).") var user: String?
    @Option(help: "Where unsent messages wait (default: .ticks-chat/USER-outbox.sqlite).") var outbox: String?
    @Flag(name: .customLong("no-color"), help: "No ANSI colours.") var noColor = false

    func run() async throws {
        guard let cid = ChannelID(cid: channel) else {
            throw ValidationError("--channel must be TYPE:ID, e.g. messaging:trip")
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
        let controller = await client.channel(cid)
        // Offline at start is fine: the channel loads when the connection comes.
        try? await controller.load()

        let app = ChatScreen(
            client: client, channel: controller, userID: userID,
            renderer: Renderer(colors: !noColor && ProcessInfo.processInfo.environment["NO_COLOR"] == nil),
            terminal: interactive ? Terminal() : nil)
        await app.run()
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
