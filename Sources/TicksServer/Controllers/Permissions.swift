import TicksProtocol

/// Who may do what in a channel (docs/api.md, "Permissions"): the one rule
/// every call that touches a channel, its members or its messages goes
/// through.
///
/// - A server token may do everything (app-wide power is the server's).
/// - A user token acts only in channels its user belongs to: being the
///   channel's creator or having the global role `admin` grants nothing in a
///   channel one is not a member of, and a user token cannot create a channel
///   without being one of its first members.
/// - Any member reads, sends, marks, leaves, changes their own member data
///   and edits or deletes their own messages.
/// - A member who created the channel, is one of its moderators
///   (`channel_moderator`) or has the global role `admin` also manages it:
///   updates, truncates and deletes it, adds and removes others, changes
///   roles and others' member data, deletes others' messages.
/// - Editing another's message takes an `admin` member; a hard delete of the
///   channel takes a server token.
enum ChannelPermissions {
    /// What a caller asks to do in a channel.
    enum Action: String, CaseIterable, Sendable {
        /// Make the channel (with the caller among its first members).
        case create
        /// Query or watch it; get its messages, replies, members and receipts.
        case read
        case send
        /// Mark read, unread or delivered.
        case mark
        /// Remove oneself.
        case leave
        /// Change one's own member data.
        case updateOwnMembership
        /// Edit or delete one's own message.
        case changeOwnMessage
        /// Change the channel's custom data.
        case update
        case truncate
        case delete
        /// Add or remove others, promote or demote moderators, change another member's data or channel role.
        case manageMembers
        case deleteOthersMessage
        case editOthersMessage
        case hardDelete
    }

    /// Where the caller stands in a channel, as far as the rule cares.
    enum Standing: Sendable, Equatable {
        /// A server token.
        case server
        /// A user token whose user is not a member, whatever their role and
        /// whoever created the channel.
        case outsider
        /// An ordinary member.
        case member
        /// A member who created the channel or is one of its moderators.
        case manager
        /// A member whose global role is `admin`.
        case admin
    }

    /// The rule itself.
    static func allows(_ action: Action, _ standing: Standing) -> Bool {
        switch standing {
        case .server: true
        case .outsider: false
        case .member: memberActions.contains(action)
        case .manager: action != .editOthersMessage && action != .hardDelete
        case .admin: action != .hardDelete
        }
    }

    /// What every member may do.
    static let memberActions: Set<Action> = [
        .create, .read, .send, .mark, .leave, .updateOwnMembership, .changeOwnMessage,
    ]

    /// The standing of `principal` in a channel made by `createdBy`: for a
    /// user token, from their membership (nil when not a member) and global role.
    static func standing(
        of principal: Principal, role: String?, membership: ChannelRole?, createdBy: String?
    ) -> Standing {
        guard case .user(let userID) = principal else { return .server }
        guard let membership else { return .outsider }
        if role == "admin" { return .admin }
        return membership == .moderator || createdBy == userID ? .manager : .member
    }

    /// The standing that decides what every member may do (`memberActions`),
    /// where only membership matters.
    static func standing(of principal: Principal, isMember: Bool) -> Standing {
        guard case .user = principal else { return .server }
        return isMember ? .member : .outsider
    }

    /// A change to a channel's members and data (`POST /channels/{type}/{id}`).
    struct Change {
        var adding: [String] = []
        var removing: [String] = []
        var changesModerators = false
        var changesData = false

        /// The actions the change takes when `userID` asks for it: reading the
        /// channel (the answer shows it and its members), and removing only
        /// oneself is leaving; any other change of members manages them.
        func actions(by userID: String?) -> [Action] {
            var actions: [Action] = [.read]
            if !adding.isEmpty || changesModerators || removing.contains(where: { $0 != userID }) {
                actions.append(.manageMembers)
            } else if !removing.isEmpty {
                actions.append(.leave)
            }
            if changesData { actions.append(.update) }
            return actions
        }
    }
}

extension ChannelPermissions {
    /// `principal`'s standing in `channel`, looked up in `store`, as far as
    /// `actions` need it: what every member may do needs no role.
    static func standing(
        of principal: Principal, in channel: ChannelRecord, for actions: [Action], store: any TicksStore
    ) async throws -> Standing {
        guard case .user(let userID) = principal else { return .server }
        if actions.allSatisfy(memberActions.contains) {
            return standing(of: principal, isMember: try await store.isMember(userID, of: channel.pk))
        }
        guard let membership = try await store.member(userID, of: channel) else { return .outsider }
        let role = try await store.users(ids: [userID])[userID]?.role
        return standing(of: principal, role: role, membership: membership.channelRole, createdBy: channel.createdBy)
    }

    /// Throws 403 unless the rule lets the caller of `context` take every one of `actions` in `channel`.
    static func require(
        _ actions: [Action], in channel: ChannelRecord, context: TicksRequestContext, store: any TicksStore
    ) async throws {
        guard !actions.isEmpty else { return }
        let principal = try context.requirePrincipal()
        let standing = try await standing(of: principal, in: channel, for: actions, store: store)
        try require(actions, in: channel.cid, as: principal, standing: standing)
    }

    static func require(
        _ action: Action, in channel: ChannelRecord, context: TicksRequestContext, store: any TicksStore
    ) async throws {
        try await require([action], in: channel, context: context, store: store)
    }

    /// Throws 403 unless `standing` allows every one of `actions` in channel `cid`.
    static func require(_ actions: [Action], in cid: ChannelID?, as principal: Principal, standing: Standing) throws {
        guard let refused = actions.first(where: { !allows($0, standing) }) else { return }
        throw refusal(refused, cid: cid, principal: principal, standing: standing)
    }

    /// The 403 for `action`, saying why.
    static func refusal(_ action: Action, cid: ChannelID?, principal: Principal, standing: Standing) -> APIError {
        let who: String = if case .user(let userID) = principal { "user '\(userID)'" } else { "this token" }
        let channel = cid.map { "channel \($0)" } ?? "this channel"
        switch (standing, action) {
        case (.outsider, .create):
            return .forbidden("\(who) cannot create \(channel) without being one of its members (data.members)")
        case (.outsider, _):
            return .forbidden("\(who) is not a member of \(channel)")
        case (_, .hardDelete):
            return .forbidden("hard_delete needs a server token")
        case (_, .editOthersMessage):
            return .forbidden(
                "\(who) may not edit another user's message in \(channel): only admins who are members may")
        case (_, .deleteOthersMessage):
            return .forbidden(
                "\(who) may not delete another user's message in \(channel): only its creator, its moderators "
                    + "and admins who are members may")
        default:
            return .forbidden(
                "\(who) may not change \(channel) or its members: only its creator, its moderators "
                    + "and admins who are members may; a member may only remove themselves")
        }
    }
}

extension ChannelPermissions {
    /// One of Stream's `own_capabilities` that Ticks serves: the action it
    /// takes, and the channel type's switch it needs (docs/compatibility.md,
    /// "Capabilities").
    struct Capability: Sendable {
        var name: String
        var action: Action
        var needs: Switch? = nil
    }

    /// A channel type's switch a capability needs on.
    enum Switch: Sendable {
        case replies, readEvents, deliveryEvents, typingEvents

        func isOn(in config: ChannelConfig) -> Bool {
            switch self {
            case .replies: config.replies
            case .readEvents: config.readEvents
            case .deliveryEvents: config.deliveryEvents
            case .typingEvents: config.typingEvents
            }
        }
    }

    /// Every capability Ticks may list, in Stream's names. What Ticks does
    /// not serve (reactions, quotes, uploads, pins, polls, search, mutes,
    /// flags, slow mode) is never listed, so Stream's UI kits hide it.
    static let capabilities: [Capability] = [
        Capability(name: "send-message", action: .send),
        Capability(name: "send-reply", action: .send, needs: .replies),
        Capability(name: "read-events", action: .mark, needs: .readEvents),
        Capability(name: "delivery-events", action: .mark, needs: .deliveryEvents),
        Capability(name: "typing-events", action: .send, needs: .typingEvents),
        Capability(name: "send-typing-events", action: .send, needs: .typingEvents),
        Capability(name: "update-own-message", action: .changeOwnMessage),
        Capability(name: "delete-own-message", action: .changeOwnMessage),
        Capability(name: "update-any-message", action: .editOthersMessage),
        Capability(name: "delete-any-message", action: .deleteOthersMessage),
        Capability(name: "update-channel", action: .update),
        Capability(name: "update-channel-members", action: .manageMembers),
        Capability(name: "delete-channel", action: .delete),
        Capability(name: "leave-channel", action: .leave),
    ]

    /// Stream's `own_capabilities` for `standing` in a channel of type
    /// `config`: the capabilities whose action the rule allows and whose
    /// switch the type has on. An outsider has none.
    static func ownCapabilities(_ standing: Standing, config: ChannelConfig) -> [String] {
        capabilities.filter { capability in
            allows(capability.action, standing) && capability.needs?.isOn(in: config) ?? true
        }.map(\.name)
    }

    /// `viewer`'s capabilities in the channel `snapshot` shows; a server
    /// token's own (no viewer) are all the type allows.
    static func ownCapabilities(of viewer: String?, in snapshot: ChannelSnapshot) -> [String] {
        let standing: Standing
        if let viewer {
            standing = ChannelPermissions.standing(
                of: .user(viewer), role: snapshot.users[viewer]?.role,
                membership: snapshot.members.first { $0.userID == viewer }?.channelRole,
                createdBy: snapshot.channel.createdBy)
        } else {
            standing = .server
        }
        return ownCapabilities(standing, config: snapshot.config)
    }
}
