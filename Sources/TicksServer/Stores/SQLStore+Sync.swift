import TicksProtocol
import TicksReceipts

/// What changed in a channel since a time (`POST /sync`), read in one snapshot.
extension SQLStore {
    public func changes(in cid: ChannelID, for userID: String, since: Timestamp, limit: Int) async throws
        -> ChannelChanges
    {
        let after = since.microseconds
        // One more than the limit of each: finding it means the limit is passed.
        let count = limit + 1
        let actors = schema.has(.actors)
        return try await engine.read {
            Step.row(StoreSQL.channelForSync(type: cid.type, id: cid.id, member: userID, actors: actors)).then { row in
                guard let row else { return .done(ChannelChanges(access: .gone)) }
                let (channel, config) = try StoreRows.channel(row)
                // Of a deleted channel, `is_member` says whether the user was a member when it was
                // deleted: anyone else is told what a cid that never existed tells, nothing more.
                guard try row.bool(14) else { return .done(ChannelChanges(access: .gone)) }
                let channelActors = ChangeActors(
                    updatedBy: try row.optionalText(15), truncatedBy: try row.optionalText(16),
                    deletedBy: try row.optionalText(17))
                if let deletedAt = try row.optionalInt(13) {
                    var deleted = ChannelChanges(
                        access: .deleted(at: Timestamp(microseconds: deletedAt)), channel: channel, config: config)
                    deleted.actors = channelActors
                    return Fetch.users([channelActors.deletedBy].compactMap { $0 }).map { users in
                        deleted.users = users
                        return deleted
                    }
                }
                var changes = ChannelChanges(access: .member, channel: channel, config: config)
                changes.actors = channelActors
                let changedBy = { (rows: [any StoreRow]) in
                    for row in rows { changes.actors.messages[try row.text(2)] = try row.optionalText(15) }
                }
                let message = { (row: any StoreRow) in try StoreRows.message(row, cid: channel.cid) }
                return Step.rows(StoreSQL.newestMessages(of: channel, count: count)).then { rows in
                    let newest = try rows.map(message)
                    changes.newMessages = newest.filter { $0.createdAt > since }
                    // All of the newest `count` came after `since`: more than `limit` were missed.
                    changes.tooMany = newest.count == count && changes.newMessages.count == count
                    return Step.rows(
                        StoreSQL.messages(of: channel, changedIn: .edited, after: after, limit: count, actors: actors))
                }.then { edited in
                    Step.rows(
                        StoreSQL.messages(of: channel, changedIn: .deleted, after: after, limit: count, actors: actors)
                    )
                        .map { deleted in
                            // Deleted last: a message edited and then deleted is told as deleted, by its deleter.
                            try changedBy(edited)
                            try changedBy(deleted)
                            return (try edited.map(message), try deleted.map(message))
                        }
                }.then { (edited: [MessageRecord], deleted: [MessageRecord]) in
                    changes.tooMany = changes.tooMany || edited.count == count || deleted.count == count
                    // A message edited and then deleted is reported once, as deleted.
                    let deletedIDs = Set(deleted.map(\.id))
                    changes.changedMessages = edited.filter { !deletedIDs.contains($0.id) } + deleted
                    return Step.rows(
                        StoreSQL.memberStates(of: channel.pk, changedAfter: after, or: userID, limit: count + 1))
                }.then { rows in
                    changes.members = try rows.map { try StoreRows.memberState($0) }
                    changes.tooMany = changes.tooMany || changes.members.count > count
                    return Step.rows(StoreSQL.removals(from: channel.pk, after: after, limit: count))
                }.then { rows in
                    changes.removals = try rows.map { (userID: try $0.text(0), at: Timestamp(microseconds: try $0.int(1))) }
                    changes.tooMany = changes.tooMany || changes.removals.count == count
                    return Step.rows(StoreSQL.threadReads(of: userID, in: channel.pk, after: after, limit: count))
                }.then { rows in
                    changes.threadReads = try rows.map { row in
                        ThreadRead(
                            parent: try StoreRows.message(row, cid: channel.cid),
                            readAt: Timestamp(microseconds: try row.int(15)), lastReadMessageID: try row.optionalText(16))
                    }
                    changes.tooMany = changes.tooMany || changes.threadReads.count == count
                    let named =
                        changes.newMessages.map(\.userID) + changes.changedMessages.map(\.userID)
                        + changes.members.map(\.userID) + changes.removals.map(\.userID) + [channel.createdBy].compactMap { $0 }
                        + changes.actors.userIDs
                    return Fetch.users(named)
                }.map { users in
                    changes.users = users
                    return changes
                }
            }
        }
    }
}
