#if canImport(SwiftUI)
import SwiftUI
import TicksClient

/// The user's channels, newest message first, kept up to date.
@MainActor @Observable
final class ChannelListModel {
    let client: ChatClient
    private(set) var list: ChatChannelList?
    private(set) var controller: ChannelListController?
    var error: String?

    init(client: ChatClient) {
        self.client = client
    }

    /// Follows the list until the view's task is cancelled.
    func run() async {
        // Every channel the user is a member of, the newest message first.
        let controller = await client.channels(filter: .all, sort: [.lastMessageAt])
        self.controller = controller
        // The first value shows what the device cache kept, before the network answers.
        let updates = await controller.updates()
        let loading = Task {
            do {
                try await controller.load()
            } catch {
                self.error = String(describing: error)
            }
        }
        for await list in updates {
            self.list = list
        }
        loading.cancel()
    }
}

struct ChannelListView: View {
    let session: ChatSession
    @State private var model: ChannelListModel

    init(session: ChatSession) {
        self.session = session
        _model = State(initialValue: ChannelListModel(client: session.client))
    }

    var body: some View {
        List(model.list?.channels ?? []) { summary in
            Text(summary.displayName(currentUserID: session.userID))
        }
        .overlay {
            if model.list?.isLoaded != true {
                ProgressView()
            }
        }
        .navigationTitle("Chats")
        .task { await model.run() }
    }
}
#endif
