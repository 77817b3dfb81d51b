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
#endif
