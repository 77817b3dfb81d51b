#if canImport(SwiftUI)
import SwiftUI
import TicksClient

/// One channel in the list: its name, and its newest message with that message's ticks.
struct ChannelRow: View {
    let summary: ChatChannelSummary
    let currentUserID: String

    var body: some View {
        let unread = summary.unreadCount > 0
        VStack(alignment: .leading, spacing: 2) {
            HStack {
                Text(summary.displayName(currentUserID: currentUserID))
                    .font(.headline)
                    .lineLimit(1)
                Spacer()
                if let time = summary.lastMessageAt {
                    Text(time, style: .time)
                        .font(.caption)
                        .foregroundStyle(unread ? Color.blue : Color.secondary)
                }
            }
            HStack(spacing: 4) {
                if let message = summary.lastMessage {
                    // Only own messages have a status; for others' this draws nothing.
                    DeliveryCheckmarks(status: message.deliveryStatus)
                    Text(preview(of: message))
                        .font(.subheadline)
                        .foregroundStyle(.secondary)
                        .lineLimit(1)
                }
                Spacer()
                if unread {
                    UnreadBadge(count: summary.unreadCount)
                }
            }
        }
        .accessibilityElement(children: .combine)
    }

    private func preview(of message: ChatMessage) -> String {
        if message.isDeleted { return "Message deleted" }
        guard summary.memberCount > 2 else { return message.text }
        let author = message.isSentByCurrentUser ? "You" : message.author.displayName
        return "\(author): \(message.text)"
    }
}

/// The number of unread messages in a blue capsule.
struct UnreadBadge: View {
    let count: Int

    var body: some View {
        Text(count > 99 ? "99+" : "\(count)")
            .font(.caption.weight(.semibold))
            .foregroundStyle(.white)
            .padding(.horizontal, 7)
            .padding(.vertical, 2)
            .background(Capsule().fill(Color.blue))
            .accessibilityLabel("\(count) unread")
    }
}
#endif
