import TicksProtocol

/// The channel types every store starts with (docs/concepts.md, "Channel types"): messaging and team
/// with read and delivery events on, livestream with both off.
enum BuiltInChannelTypes {
    static func all(now: Timestamp) -> [ChannelConfig] {
        [
            ChannelConfig(name: "messaging", readEvents: true, deliveryEvents: true, createdAt: now, updatedAt: now),
            ChannelConfig(name: "team", readEvents: true, deliveryEvents: true, createdAt: now, updatedAt: now),
            ChannelConfig(
                name: "livestream", readEvents: false, deliveryEvents: false, typingEvents: false,
                connectEvents: false, createdAt: now, updatedAt: now),
        ]
    }
}
