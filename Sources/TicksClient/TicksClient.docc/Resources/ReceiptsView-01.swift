#if canImport(SwiftUI)
import SwiftUI
import TicksClient

/// Who read an own message and whose devices have it, with the server's times.
struct ReceiptsView: View {
    let client: ChatClient
    let message: ChatMessage
    @State private var receipts: MessageReceipts?
    @State private var error: String?

    var body: some View {
        NavigationStack {
            List {
                if let receipts {
                    Section("Read by \(receipts.readCount)") {
                        ForEach(receipts.readBy, id: \.user.id) { receipt in
                            row(receipt.user, at: receipt.readAt)
                        }
                    }
                    Section("Delivered, not read yet") {
                        ForEach(receipts.deliveredOnlyTo, id: \.user.id) { receipt in
                            row(receipt.user, at: receipt.deliveredAt)
                        }
                    }
                } else if let error {
                    Text(error)
                } else {
                    ProgressView()
                }
            }
            .navigationTitle("Message info")
        }
        .task {
            do {
                receipts = try await client.receipts(for: message.id)
            } catch {
                self.error = String(describing: error)
            }
        }
    }

    private func row(_ user: ChatUser, at time: Date?) -> some View {
        HStack {
            Text(user.displayName)
            Spacer()
            if let time {
                Text(time.formatted(date: .omitted, time: .standard))
                    .foregroundStyle(.secondary)
            }
        }
    }
}
#endif
