#if canImport(SwiftUI)
import SwiftUI
import TicksClient

/// One or two checkmarks, overlapping like a chat app's ticks.
struct Checkmarks: View {
    let count: Int

    var body: some View {
        HStack(spacing: -6) {
            ForEach(0..<count, id: \.self) { _ in
                Image(systemName: "checkmark")
            }
        }
        .font(.caption2.weight(.bold))
    }
}

/// The ticks of one message, from `ChatMessage.deliveryStatus` alone.
struct DeliveryCheckmarks: View {
    /// Nil for other people's messages, and when the channel type has read events off.
    let status: DeliveryStatus?

    var body: some View {
        switch status {
        case nil:
            EmptyView()
        case .pending?:
            Image(systemName: "clock")
                .font(.caption2)
                .foregroundStyle(.secondary)
        case .failed?:
            Image(systemName: "exclamationmark.circle.fill")
                .font(.caption2)
                .foregroundStyle(.red)
        case .sent?:
            Checkmarks(count: 1).foregroundStyle(.secondary)
        case .delivered?:
            Checkmarks(count: 2).foregroundStyle(.secondary)
        case .read?:
            Checkmarks(count: 2).foregroundStyle(.blue)
        }
    }
}

/// A message's read indicator, drawn from the SDK's `ReadIndicator` model.
struct ReadIndicatorView: View {
    let indicator: ReadIndicator

    var body: some View {
        symbol
    }

    @ViewBuilder private var symbol: some View {
        switch indicator.state {
        case .hidden:
            EmptyView()
        case .pending:
            Image(systemName: "clock").font(.caption2).foregroundStyle(color)
        case .failed:
            Image(systemName: "exclamationmark.circle.fill").font(.caption2).foregroundStyle(color)
        case .sent, .delivered, .read:
            Checkmarks(count: indicator.checkmarks).foregroundStyle(color)
        }
    }

    private var color: Color {
        switch indicator.tint {
        case .none: .clear
        case .grey: .secondary
        case .blue: .blue
        case .error: .red
        }
    }
}

#Preview("Statuses") {
    VStack(alignment: .trailing, spacing: 12) {
        DeliveryCheckmarks(status: .pending)
        DeliveryCheckmarks(status: .failed)
        DeliveryCheckmarks(status: .sent)
        DeliveryCheckmarks(status: .delivered)
        DeliveryCheckmarks(status: .read)
    }
    .padding()
}
#endif
