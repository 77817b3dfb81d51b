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
#endif
