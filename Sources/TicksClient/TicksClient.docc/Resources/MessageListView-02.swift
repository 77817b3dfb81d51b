#if canImport(SwiftUI)
import SwiftUI
import TicksClient

/// One channel screen's state: the latest `ChatChannel` value, kept up to date.
@MainActor @Observable
final class ChannelScreenModel {
    let client: ChatClient
    let cid: ChannelID
    private(set) var channel: ChatChannel?
    private(set) var controller: ChannelController?
    var draft = ""
    var error: String?

    init(client: ChatClient, cid: ChannelID) {
        self.client = client
        self.cid = cid
    }

    /// Opens the channel and follows it until the view's task is cancelled.
    func run() async {
        let controller = await client.channel(cid)
        self.controller = controller
        // The first value is what the client already has (the device cache's, after a restart).
        let updates = await controller.updates()
        let loading = Task {
            do {
                try await controller.load()
            } catch {
                self.error = String(describing: error)
            }
        }
        for await channel in updates {
            self.channel = channel
        }
        loading.cancel()
    }

    func send() async {
        let text = draft.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, let controller else { return }
        draft = ""
        do {
            // Returns at once with the message pending; the updates show it move on.
            try await controller.send(text)
        } catch {
            self.error = String(describing: error)
        }
    }
}

/// A message bubble with its time and read indicator.
struct MessageRow: View {
    let message: ChatMessage
    let indicator: ReadIndicator

    var body: some View {
        let own = message.isSentByCurrentUser
        HStack {
            if own { Spacer(minLength: 40) }
            VStack(alignment: own ? .trailing : .leading, spacing: 2) {
                if !own {
                    Text(message.author.displayName)
                        .font(.caption)
                        .foregroundStyle(.secondary)
                }
                Text(message.isDeleted ? "Message deleted" : message.text)
                    .italic(message.isDeleted)
                    .padding(8)
                    .background(
                        own ? Color.blue.opacity(0.15) : Color.gray.opacity(0.15),
                        in: RoundedRectangle(cornerRadius: 12))
                HStack(spacing: 4) {
                    Text(message.createdAt, style: .time)
                    ReadIndicatorView(indicator: indicator)
                }
                .font(.caption2)
                .foregroundStyle(.secondary)
            }
            if !own { Spacer(minLength: 40) }
        }
    }
}

/// A channel's messages, oldest at the top, with a field to write a new one.
struct MessageListView: View {
    let title: String
    @State private var model: ChannelScreenModel

    init(client: ChatClient, cid: ChannelID, title: String) {
        self.title = title
        _model = State(initialValue: ChannelScreenModel(client: client, cid: cid))
    }

    var body: some View {
        VStack(spacing: 0) {
            ScrollView {
                LazyVStack(spacing: 8) {
                    if let channel = model.channel {
                        ForEach(channel.messages) { message in
                            MessageRow(message: message, indicator: channel.readIndicator(for: message))
                        }
                    }
                }
                .padding(.horizontal)
            }
            .defaultScrollAnchor(.bottom)
            composer
        }
        .navigationTitle(title)
        .task { await model.run() }
    }

    private var composer: some View {
        HStack {
            TextField("Message", text: $model.draft)
                .textFieldStyle(.roundedBorder)
                .onSubmit { Task { await model.send() } }
            Button("Send") { Task { await model.send() } }
                .disabled(model.draft.isEmpty)
        }
        .padding()
    }
}
#endif
