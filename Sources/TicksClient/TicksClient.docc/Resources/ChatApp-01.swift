#if canImport(SwiftUI)
import SwiftUI
import TicksClient

/// The app's one `ChatClient`, the user it connects as, and the connection's status.
@MainActor @Observable
final class ChatSession {
    let client: ChatClient
    let userID: String
    private(set) var status: ConnectionStatus = .disconnected

    init(serverURL: URL, apiKey: String, userID: String) {
        // One database per user: the outbox and the device cache. Not in Caches:
        // it holds messages the user wrote that the server does not have yet.
        let file = URL.applicationSupportDirectory.appending(path: "Ticks/\(userID).sqlite")
        let configuration = ChatClientConfiguration(baseURL: serverURL, apiKey: apiKey, outbox: .file(file))
        self.client = Self.makeClient(configuration)
        self.userID = userID
    }

    private static func makeClient(_ configuration: ChatClientConfiguration) -> ChatClient {
        do {
            return try ChatClient(configuration: configuration)
        } catch {
            // The file could not be opened (a full disk, say): chat on, keeping nothing.
            var inMemory = configuration
            inMemory.outbox = .inMemory
            do {
                return try ChatClient(configuration: inMemory)
            } catch {
                // An in-memory database needs no disk: not opening one is a bug, not a state to show.
                fatalError("could not open an in-memory database: \(error)")
            }
        }
    }

    /// Connects, then follows the connection's status until the task is cancelled.
    func run(token: String) async {
        let statuses = await client.connectionStatuses()
        do {
            // Returns when connected, or at once with the server out of reach
            // (the client keeps trying); throws only when the token is refused.
            try await client.connect(userID: userID, token: token)
        } catch {
            // Ask your backend for a new token and call run(token:) again.
        }
        for await status in statuses {
            self.status = status
        }
    }
}

@main
struct ChatApp: App {
    // Your server, your app's API key, and a token your backend made for the user
    // (for a local server: `swift run ticks serve`, then `swift run ticks token alice`).
    @State private var session = ChatSession(
        serverURL: URL(string: "http://127.0.0.1:3030")!, apiKey: "YOUR_API_KEY", userID: "alice")
    @Environment(\.scenePhase) private var scenePhase

    var body: some Scene {
        WindowGroup {
            NavigationStack {
                ChannelListView(session: session)
            }
            .task { await session.run(token: "YOUR_USER_TOKEN") }
        }
        .onChange(of: scenePhase) { _, phase in
            // Write the device cache now, in case the system ends the app in the background.
            if phase == .background {
                Task { await session.client.flushCache() }
            }
        }
    }
}
#endif
