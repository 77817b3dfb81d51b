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
        HStack(spacing: 4) {
            symbol
            if let readCount = indicator.readCount {
                Text("Read by \(readCount)")
                    .font(.caption2)
                    .foregroundStyle(.secondary)
            }
            readers
        }
        .accessibilityElement(children: .ignore)
        .accessibilityLabel(indicator.accessibilityLabel)
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

    /// The most recent readers as initials in circles, then "and N more".
    @ViewBuilder private var readers: some View {
        if !indicator.lastReaders.isEmpty {
            HStack(spacing: -4) {
                ForEach(indicator.lastReaders) { reader in
                    Text(reader.initials)
                        .font(.system(size: 8, weight: .semibold))
                        .frame(width: 16, height: 16)
                        .background(Circle().fill(Color.blue.opacity(0.2)))
                }
            }
            if let more = indicator.moreReadersLabel {
                Text(more)
                    .font(.caption2)
                    .foregroundStyle(.secondary)
            }
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

extension ReadIndicator {
    /// An indicator for previews. `ReadIndicator` has no public initializer,
    /// but every property can be set, starting from `.hidden`.
    static func preview(
        _ state: ReadIndicator.State, checkmarks: Int, tint: ReadIndicator.Tint, readCount: Int? = nil,
        readers: [ChatUser] = [], moreReaders: Int = 0, label: String
    ) -> ReadIndicator {
        var indicator = ReadIndicator.hidden
        indicator.state = state
        indicator.checkmarks = checkmarks
        indicator.tint = tint
        indicator.readCount = readCount
        indicator.lastReaders = readers
        indicator.moreReadersCount = moreReaders
        indicator.accessibilityLabel = label
        return indicator
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

#Preview("Read in a group") {
    ReadIndicatorView(
        indicator: .preview(
            .read, checkmarks: 2, tint: .blue, readCount: 5,
            readers: [ChatUser(id: "bob", name: "Bob Stone"), ChatUser(id: "carol"), ChatUser(id: "dan")],
            moreReaders: 2, label: "Read by 5"))
        .padding()
}
#endif
