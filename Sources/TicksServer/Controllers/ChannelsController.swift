import Foundation
import Hummingbird
import TicksProtocol
import TicksReceipts

/// Channels, their members, messages and the read/delivered marks: the
/// sections Channels, Members, Messages and Receipts of docs/api.md, one
/// file each (`ChannelsController+Channels.swift`, `+Members`, `+Messages`,
/// `+Receipts`, `+Typing`, `+Watching`); this file holds the routes and what they share.
struct ChannelsController {
    let store: any TicksStore
    let hub: ConnectionHub
    let events: EventPublisher
    let receipts: Receipts
    let limits: ServerLimits
    var deleter: ChannelDeleter { ChannelDeleter(store: store, events: events) }

    static let defaultMessageLimit = 25
    static let maxMessageLimit = 300
    static let maxChannelsPerQuery = 30

    /// The routes, in the order of docs/api.md's sections (one file each).
    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        // Channels
        group.on(.getOrCreateChannel, use: queryChannel)
        group.on(.queryChannels, use: queryChannels)
        group.on(.getOrCreateDistinctChannel, use: queryDistinctChannel)
        group.on(.updateChannel, use: updateChannel)
        group.on(.updateChannelPartial, use: updateChannelPartial)
        group.on(.truncateChannel, use: truncateChannel)
        group.on(.deleteChannel, use: deleteChannel)
        group.on(.deleteChannels, use: deleteChannels)
        group.on(.getTask, use: getTask)
        // Members
        group.on(.queryMembers, use: queryMembers)
        group.on(.updateMemberPartial, use: updateMemberPartial)
        // Messages
        group.on(.sendMessage, use: sendMessage)
        // Typing
        group.on(.sendEvent, use: sendEvent)
        // Watching
        group.on(.stopWatchingChannel, use: stopWatching)
        // Receipts
        group.on(.markRead, use: markRead)
        group.on(.markUnread, use: markUnread)
        group.on(.markChannelsRead, use: markAllRead)
        group.on(.markThreadsRead, use: markAllThreadsRead)
        group.on(.markDelivered, use: markDelivered)
    }

    // MARK: Helpers

    /// The channel the path names (`/channels/{type}/{id}/...`), its parts checked.
    func channelPath(_ context: TicksRequestContext) throws -> ChannelID {
        let type = try requireID(try context.pathParameter("type"), Identifier.channelTypeName, "channel type")
        let id = try requireID(try context.pathParameter("id"), Identifier.channelID, "channel id")
        return ChannelID(type: type, id: id)
    }

    /// The channel of the path, for an action every member may take; a user token must belong to it.
    func loadChannel(_ context: TicksRequestContext, to action: ChannelPermissions.Action) async throws
        -> ChannelRecord
    {
        try await receipts.channel(try channelPath(context), for: try context.requirePrincipal(), to: action)
    }

    func messageLimit(_ limit: WholeNumber?, _ name: String) throws -> Int {
        try withinBounds(limit, name, 0...Self.maxMessageLimit) ?? Self.defaultMessageLimit
    }
}
