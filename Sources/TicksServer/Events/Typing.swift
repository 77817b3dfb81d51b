import TicksProtocol

/// `typing.start` and `typing.stop` (docs/events.md, "Typing"): a member's
/// typing, told to the channel's members as it happens. Never stored, so
/// never sent to webhooks nor told by `POST /sync`; a client drops a typist
/// it has not heard from for a few seconds.
struct TypingNotice: Sendable {
    let event: Event

    init(_ type: EventType, by user: User, in cid: ChannelID, parentID: String?, at time: Timestamp) {
        assert(type == .typingStart || type == .typingStop)
        var event = Event(type: type, createdAt: time, cid: cid, user: user)
        event.parentID = parentID
        self.event = event
    }

    /// Who hears it: every member, the typist's other connections too (Stream's
    /// kits leave their own user out of who is typing); no one when the typist
    /// keeps typing private (`privacy_settings.typing_indicators.enabled: false`).
    func recipients(members: [String]) -> [String] {
        guard let user = event.user, user.sharesTyping else { return [] }
        return members
    }
}
