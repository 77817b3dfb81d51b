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

    /// The next page, once the last loaded row appears.
    func loadMore(after summary: ChatChannelSummary) async {
        guard let list, list.hasMore, list.channels.last?.id == summary.id, let controller else { return }
        do {
            try await controller.loadMore()
        } catch {
            self.error = String(describing: error)
        }
    }

    /// The first page again (pull to refresh).
    func reload() async {
        try? await controller?.load()
    }

    func markAllRead() async {
        do {
            try await client.markAllRead()
        } catch {
            self.error = String(describing: error)
        }
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
        List {
            Section {
                ForEach(model.list?.channels ?? []) { summary in
                    NavigationLink(value: summary.cid) {
                        ChannelRow(summary: summary, currentUserID: session.userID)
                    }
                    .task { await model.loadMore(after: summary) }
                }
            } header: {
                if let line = headerLine {
                    Text(line)
                }
            }
        }
        .overlay {
            if model.list?.isLoaded != true {
                ProgressView()
            }
        }
        .navigationTitle("Chats")
        .toolbar {
            Button("Mark all read") {
                Task { await model.markAllRead() }
            }
            .disabled((model.list?.totalUnreadCount ?? 0) == 0)
        }
        .refreshable { await model.reload() }
        .navigationDestination(for: ChannelID.self) { cid in
            MessageListView(client: session.client, cid: cid, title: title(of: cid))
        }
        .task { await model.run() }
    }

    /// The connection while it is not up, else the unread totals.
    private var headerLine: String? {
        switch session.status {
        case .connected:
            guard let list = model.list, list.totalUnreadCount > 0 else { return nil }
            return "\(list.totalUnreadCount) unread in \(list.unreadChannels) chats"
        case .connecting:
            return "Connecting…"
        case .disconnected:
            return "Offline: showing saved chats"
        case .refused:
            return "The server refused the token"
        }
    }

    private func title(of cid: ChannelID) -> String {
        model.list?.channels.first { $0.cid == cid }?.displayName(currentUserID: session.userID) ?? cid.id
    }
}
#endif
