import TicksProtocol

/// Who may change a channel, after Stream's roles (docs/api.md, "Permissions"). One place for
/// the rule, whatever the call: adding and removing members, changing
/// moderators, and updating or deleting the channel.
enum ChannelPermissions {
    /// Who is asking, as far as the rule cares.
    struct Actor {
        let principal: Principal
        /// The acting user (nil for a server token).
        let user: User?
        /// The acting user's membership of the channel, if any.
        let membership: MemberState?
    }

    /// A channel change the caller asks for.
    struct Change {
        var adding: [String] = []
        var removing: [String] = []
        var changesModerators = false
        /// Updates, truncates or deletes the channel, or another member's data.
        var changesData = false
    }

    /// Server tokens, users with the global role "admin", the channel's
    /// creator (its owner) and its moderators manage it.
    static func mayManage(_ channel: ChannelRecord, as actor: Actor) -> Bool {
        switch actor.principal {
        case .server:
            return true
        case .user(let userID):
            return actor.user?.role == "admin" || channel.createdBy == userID
                || actor.membership?.channelRole == .moderator
        }
    }

    /// Whether `actor` may make `change`: a manager may make any; an ordinary
    /// member may only remove themselves (leave the channel).
    static func may(_ change: Change, in channel: ChannelRecord, as actor: Actor) -> Bool {
        if mayManage(channel, as: actor) { return true }
        guard case .user(let userID) = actor.principal, actor.membership != nil else { return false }
        return change.adding.isEmpty && !change.changesModerators && !change.changesData
            && change.removing.allSatisfy { $0 == userID }
    }
}
