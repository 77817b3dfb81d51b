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

    /// Marks read what the user sees (created in `run()`).
    private var tracker: ReadTracker?
    private var visibleIDs: Set<String> = []
    private var isAtBottom = false
    private var isAppActive = false

    init(client: ChatClient, cid: ChannelID) {
        self.client = client
        self.cid = cid
    }

    /// Opens the channel and follows it until the view's task is cancelled.
    func run() async {
        let controller = await client.channel(cid)
        self.controller = controller
        let tracker = ReadTracker(channel: controller)
        self.tracker = tracker
        updateTracker()
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
        await tracker.stop()
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

    func resend(_ message: ChatMessage) async {
        do {
            try await client.resend(messageId: message.id)
        } catch {
            self.error = String(describing: error)
        }
    }

    // MARK: What ReadTracker needs to know

    func messageAppeared(_ id: String) {
        visibleIDs.insert(id)
        updateTracker()
    }

    func messageDisappeared(_ id: String) {
        visibleIDs.remove(id)
        updateTracker()
    }

    func setAtBottom(_ atBottom: Bool) {
        isAtBottom = atBottom
        updateTracker()
    }

    func setAppActive(_ active: Bool) {
        isAppActive = active
        updateTracker()
    }

    private func updateTracker() {
        guard let tracker else { return }
        let (visible, atBottom, active) = (visibleIDs, isAtBottom, isAppActive)
        Task {
            await tracker.setVisibleMessages(visible)
            await tracker.setAtBottom(atBottom)
            await tracker.setAppActive(active)
        }
    }
}

/// A message bubble with its time and read indicator.
struct MessageRow: View {
    let message: ChatMessage
    let indicator: ReadIndicator
    var onResend: () -> Void = {}

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
                if case .failed = message.localState {
                    Button("Not sent. Tap to try again", action: onResend)
                        .font(.caption)
                }
            }
            if !own { Spacer(minLength: 40) }
        }
    }
}

/// A channel's messages, oldest at the top, with a field to write a new one.
struct MessageListView: View {
    let title: String
    @State private var model: ChannelScreenModel
    @State private var receiptsFor: ChatMessage?
    @Environment(\.scenePhase) private var scenePhase

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
                            MessageRow(message: message, indicator: channel.readIndicator(for: message)) {
                                Task { await model.resend(message) }
                            }
                            .onTapGesture {
                                // Who received or read an own message, and when.
                                if message.isSentByCurrentUser, message.localState == nil { receiptsFor = message }
                            }
                            .onAppear { model.messageAppeared(message.id) }
                            .onDisappear { model.messageDisappeared(message.id) }
                        }
                    }
                    // On screen only while the list is scrolled to its newest message.
                    Color.clear
                        .frame(height: 1)
                        .onAppear { model.setAtBottom(true) }
                        .onDisappear { model.setAtBottom(false) }
                }
                .padding(.horizontal)
            }
            .defaultScrollAnchor(.bottom)
            composer
        }
        .navigationTitle(title)
        .task { await model.run() }
        .onChange(of: scenePhase, initial: true) { _, phase in
            model.setAppActive(phase == .active)
        }
        .sheet(item: $receiptsFor) { message in
            ReceiptsView(client: model.client, message: message)
        }
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
