#if canImport(SwiftUI)
import SwiftUI
import TicksClient

/// One channel in the list: its name, and its newest message with that message's ticks.
struct ChannelRow: View {
    let summary: ChatChannelSummary
    let currentUserID: String

    var body: some View {
        VStack(alignment: .leading, spacing: 2) {
            Text(summary.displayName(currentUserID: currentUserID))
                .font(.headline)
                .lineLimit(1)
            if let message = summary.lastMessage {
                HStack(spacing: 4) {
                    // Only own messages have a status; for others' this draws nothing.
                    DeliveryCheckmarks(status: message.deliveryStatus)
                    Text(preview(of: message))
                        .font(.subheadline)
                        .foregroundStyle(.secondary)
                        .lineLimit(1)
                }
            }
        }
    }

    private func preview(of message: ChatMessage) -> String {
        if message.isDeleted { return "Message deleted" }
        guard summary.memberCount > 2 else { return message.text }
        let author = message.isSentByCurrentUser ? "You" : message.author.displayName
        return "\(author): \(message.text)"
    }
}
#endif
