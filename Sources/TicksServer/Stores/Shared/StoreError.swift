import TicksProtocol

/// Why a store refused a change or a read. Stores know nothing of HTTP: the
/// HTTP layer turns these into Stream's errors (`APIError(_:)`), and every
/// store throws the same one for the same cause.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A channel type of that name exists already.
    case channelTypeExists(String)
    /// The channel type a stored channel or an update names is not there.
    case channelTypeNotFound(String)
    /// A new channel names a channel type that does not exist.
    case unknownChannelType(String)
    /// The channel is not there (its cid when the store had it at hand).
    case channelNotFound(cid: ChannelID?)
    /// A request names a channel that does not exist (mark delivered's entries).
    case unknownChannel(ChannelID)
    /// A user named as a member or creator has never been upserted.
    case unknownUser(String)
    /// No message has the id (or it is gone: hard-deleted, truncated away).
    case messageNotFound(String)
    /// A reply names a parent that is not a message of the channel.
    case parentNotFound(String)
    /// A reply names a parent that is itself a reply (Stream allows one level).
    case nestedReply(String)
    /// The message is not one of that channel's.
    case messageNotInChannel(messageID: String, cid: ChannelID)
    /// The message id is taken by a message of another channel.
    case messageIDInOtherChannel(String)
    /// The id belonged to a message that is gone (hard-deleted or truncated away); ids are not reused.
    case messageIDOfRemovedMessage(String)
    /// The user is not a member of the channel (its cid when the store had it at hand).
    case notMember(userID: String, cid: ChannelID?)
    /// The store found itself disagreeing with the rules (a bug, never a client's doing).
    case inconsistent(String)
    /// Adding the members would pass the channel's limit.
    case tooManyMembers(cid: ChannelID, members: Int, adding: Int, limit: Int)
    /// A statement was to bind text holding U+0000, which PostgreSQL's text
    /// cannot carry (SQLite's can): every store refuses it before the database
    /// sees it. Requests are checked before they reach a store (ids by their
    /// rules, texts by `requireStorableText`); this is the backstop that keeps
    /// the stores' answers the same when a check is missing.
    case unstorableText
    /// The node's schema is held before the migration a change needs (`--migrations-up-to`, an
    /// older release's schema in a rolling upgrade): the newer nodes make it.
    case schemaBefore(migration: String)
    /// The database did not answer in time, or cannot be reached, or cannot take
    /// the write (`StoreDeadline`): try again shortly. A write that ends so may or
    /// may not have been made; every such write is safe to repeat.
    case unavailable(Unavailability)

    /// Why the store could not serve a call.
    public enum Unavailability: Equatable, Sendable, CustomStringConvertible {
        /// No answer within the store's deadline.
        case timedOut(Duration)
        /// The database refused or dropped the connection, or is starting, stopping or read-only.
        case unreachable(String)
        /// The disk under the database is full.
        case diskFull

        public var description: String {
            switch self {
            case .timedOut(let timeout): "the database did not answer within \(timeout)"
            case .unreachable(let why): "the database cannot be reached (\(why))"
            case .diskFull: "the database's disk is full"
            }
        }
    }

    public var description: String {
        switch self {
        case .channelTypeExists(let name): "channel type '\(name)' already exists"
        case .channelTypeNotFound(let name), .unknownChannelType(let name): "channel type '\(name)' does not exist"
        case .channelNotFound(let cid): "channel \(cid.map { "\($0) " } ?? "")does not exist"
        case .unknownChannel(let cid): "channel '\(cid)' does not exist"
        case .unknownUser(let id): "user '\(id)' does not exist: upsert it first"
        case .messageNotFound(let id): "message '\(id)' does not exist"
        case .parentNotFound(let id): "parent message '\(id)' is not a message of this channel"
        case .nestedReply(let id): "message '\(id)' is a reply: replies to replies are not allowed"
        case .messageNotInChannel(let messageID, let cid): "message '\(messageID)' is not in channel \(cid)"
        case .messageIDInOtherChannel(let id): "message id '\(id)' is already used in another channel"
        case .messageIDOfRemovedMessage(let id): "message id '\(id)' belonged to a message that was removed; use a new id"
        case .notMember(let userID, let cid): "user '\(userID)' is not a member of \(cid.map { "channel \($0)" } ?? "this channel")"
        case .inconsistent(let what): "internal inconsistency: \(what)"
        case .tooManyMembers(let cid, let members, let adding, let limit):
            "channel \(cid) has \(members) members; adding \(adding) would pass the limit of \(limit)"
        case .unstorableText: "a value holds the character U+0000, which no id or text may contain"
        case .schemaBefore(let migration):
            "this node's schema is held before migration \(migration) (--migrations-up-to, an older release's): "
                + "not available here until it runs; make this change on an upgraded node"
        case .unavailable(let why): "\(why): try again shortly"
        }
    }
}
