import Foundation
import Logging
import TicksProtocol

/// Marks a channel read the way a chat screen should, so that each app does
/// not work it out again: the app tells it what is on screen, whether the
/// list is scrolled to its newest message and whether the app is active, and
/// it marks read up to the newest message on screen — only while the list is
/// at the bottom and the app active, only when that reads something from
/// someone else, and at most once per `throttle` (what changes in between
/// goes in one call). It starts with nothing on screen, not at the bottom
/// and the app not active: nothing is marked until the app says otherwise.
/// Delivered needs nothing from the app: the client marks
/// messages delivered as they arrive (and `PushDelivery` from a notification
/// extension while the app is not running).
///
/// ```swift
/// let tracker = ReadTracker(channel: channel)
/// await tracker.setAppActive(true)
/// // from the list view:
/// await tracker.setVisibleMessages(visibleIDs)
/// await tracker.setAtBottom(isScrolledToBottom)
/// ```
public actor ReadTracker {
    /// The channel it marks read.
    public nonisolated let channel: ChannelController
    /// At least this long between two marks.
    public nonisolated let throttle: Duration

    private var visible: Set<String> = []
    private var atBottom = false
    private var active = false
    private var stopped = false
    /// The clock the throttle runs on (the client's).
    private nonisolated let time: TimeSource
    /// When the last mark was made, on `time`.
    private var lastCall: Duration?
    private var pending: Task<Void, Never>?
    /// How many marks it has sent (for tests and diagnostics).
    public private(set) var marksSent = 0

    /// A tracker for one channel's screen, marking at most once per `throttle`.
    public init(channel: ChannelController, throttle: Duration = .milliseconds(500)) {
        self.channel = channel
        self.throttle = throttle
        self.time = channel.client.time
    }

    /// The ids of the messages now on screen, as the list view reports them.
    public func setVisibleMessages(_ ids: some Sequence<String>) {
        visible = Set(ids)
        changed()
    }

    /// Whether the list is scrolled to its newest message.
    public func setAtBottom(_ atBottom: Bool) {
        self.atBottom = atBottom
        changed()
    }

    /// Whether the app is active (in the foreground, the screen on).
    public func setAppActive(_ active: Bool) {
        self.active = active
        changed()
    }

    /// Marks nothing more (the screen went away).
    public func stop() {
        stopped = true
        pending?.cancel()
        pending = nil
    }

    /// The rule's inputs changed: look again, now or once the throttle allows.
    private func changed() {
        guard !stopped, active, atBottom, !visible.isEmpty, pending == nil else { return }
        let due = lastCall.map { $0 + throttle }
        let time = time
        pending = Task {
            if let due, due > time.now { try? await time.sleep(until: due) }
            await self.markIfNeeded()
        }
    }

    private func markIfNeeded() async {
        defer { pending = nil }
        guard !Task.isCancelled, !stopped, active, atBottom else { return }
        guard let state = try? await channel.state, let target = Self.target(in: state, visible: visible) else { return }
        lastCall = time.now
        do {
            try await channel.markRead(upTo: target)
            marksSent += 1
        } catch {
            channel.client.configuration.logger.debug(
                "marking read failed", metadata: ["cid": "\(channel.cid)", "error": "\(error)"])
        }
        // What became visible while the call was on its way is looked at again.
        pending = nil
        if let again = try? await channel.state, Self.target(in: again, visible: visible) != nil { changed() }
    }

    /// The newest message on screen, when reading up to it reads a message
    /// from someone else that the user has not read yet; nil otherwise.
    static func target(in state: ChatChannel, visible: Set<String>) -> String? {
        let stored = state.messages.filter { $0.localState == nil }
        guard let targetIndex = stored.lastIndex(where: { visible.contains($0.id) }) else { return nil }
        let own = state.reads.first { $0.user.id == state.currentUserID }
        let readIndex = own?.lastReadMessageId.flatMap { id in stored.firstIndex { $0.id == id } } ?? -1
        guard targetIndex > readIndex else { return nil }
        let newlyRead = stored[(readIndex + 1)...targetIndex]
        return newlyRead.contains { !$0.isSentByCurrentUser && !$0.isDeleted } ? stored[targetIndex].id : nil
    }
}
