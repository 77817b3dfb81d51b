import TicksProtocol

/// What a member's first play of a voice note or video tells (R14), and to
/// whom: the members who may see the player's reads (`ReceiptVisibility.readVisible`,
/// R8–R10) hear `message.played`; a player whose reads are private is heard by
/// their own connections alone. In a channel larger than the receipt audience's
/// full-channel limit only the author and the player hear it, as for reads.
struct PlayNotice {
    let event: Event
    /// Whether members other than the player may hear of the play.
    let othersSee: Bool

    init(_ play: PlayOutcome) {
        var event = Event(
            type: .messagePlayed, createdAt: play.playedAt, cid: play.channel.cid,
            user: Presenter.user(play.player.id, [play.player.id: play.player]))
        event.messageID = play.message.id
        event.playedAt = play.playedAt
        self.event = event
        othersSee = ReceiptVisibility.othersSeeReads(of: play.player, config: play.config)
    }

    /// The users to send `event` to live: from the channel's members (read only when others may
    /// hear). A play is a read: those who see reads only as deliveries (R15) are not told it.
    func recipients(
        of play: PlayOutcome, audience: ReceiptAudience, members: () async throws -> [String]
    ) async throws -> [String] {
        guard othersSee else { return [play.player.id] }
        let hearers =
            play.channel.memberCount <= audience.fullChannelLimit
            ? try await members() : Array(Set([play.player.id, play.message.userID]))
        let readsAsDeliveries = play.hearers.readsAsDeliveries
        return hearers.filter { !readsAsDeliveries.contains($0) || $0 == play.player.id }
    }
}
