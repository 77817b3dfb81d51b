import GRDB
import TicksProtocol
import TicksReceipts

/// One SQLite connection inside one of the store's transactions, running
/// `StoreSQL`'s statements. Statements are compiled once and kept (GRDB's
/// statement cache), except those with lists of several values, whose text
/// changes with the list's length.
struct SQLiteSession {
    let db: Database

    private func prepared(_ query: StoreQuery) throws -> (Statement, StatementArguments) {
        let (text, bindings) = SQLDialect.sqlite.render(query)
        let reusable = query.parts.allSatisfy { part in
            if case .list(_, let values) = part { return values.count <= 1 }
            return true
        }
        let statement = reusable ? try db.cachedStatement(sql: text) : try db.makeStatement(sql: text)
        let values: [(any DatabaseValueConvertible)?] = bindings.map { binding in
            switch binding {
            case .value(.int(let value)): value
            case .value(.text(let value)): value
            case .value(.null), .texts: nil
            }
        }
        return (statement, StatementArguments(values))
    }

    func rows(_ query: StoreQuery) throws -> [Row] {
        let (statement, arguments) = try prepared(query)
        return try Row.fetchAll(statement, arguments: arguments)
    }

    func row(_ query: StoreQuery) throws -> Row? {
        let (statement, arguments) = try prepared(query)
        return try Row.fetchOne(statement, arguments: arguments)
    }

    func execute(_ query: StoreQuery) throws {
        let (statement, arguments) = try prepared(query)
        try statement.execute(arguments: arguments)
    }

    // The reads every operation shares, decoded by `StoreRows`.

    func users(_ ids: some Collection<String>) throws -> [String: User] {
        guard !ids.isEmpty else { return [:] }
        var found: [String: User] = [:]
        for chunk in Array(Set(ids)).chunked(500) {
            for row in try rows(StoreSQL.users(Array(chunk))) {
                let user = try StoredJSON.user(try row.text(0))
                found[user.id] = user
            }
        }
        return found
    }

    func channel(type: String, id: String) throws -> (channel: ChannelRecord, config: ChannelConfig?)? {
        try row(StoreSQL.channel(type: type, id: id)).map { try StoreRows.channel($0) }
    }

    func channel(pk: Int64) throws -> (channel: ChannelRecord, config: ChannelConfig?) {
        guard let row = try row(StoreSQL.channel(pk: pk)) else { throw StoreError.channelNotFound }
        return try StoreRows.channel(row)
    }

    func isMember(_ userID: String, of channelPK: Int64) throws -> Bool {
        try row(StoreSQL.isMember(userID, of: channelPK))?.bool(0) ?? false
    }

    func seq(of messageID: String, in channelPK: Int64) throws -> Seq? {
        try row(StoreSQL.seq(of: messageID, in: channelPK))?.int(0)
    }

    func memberStates(_ channelPK: Int64, userID: String? = nil) throws -> [MemberState] {
        try rows(StoreSQL.memberStates(channelPK, userID: userID)).map(StoreRows.memberState)
    }

    func unreadTotals(of userID: String) throws -> UnreadTotals {
        try row(StoreSQL.unreadTotals(of: userID)).map { try StoreRows.totals($0) } ?? UnreadTotals(messages: 0, channels: 0)
    }

    func texts(_ query: StoreQuery) throws -> [String] {
        try rows(query).map { try $0.text(0) }
    }
}

extension Row: StoreRow {
    func int(_ index: Int) throws -> Int64 { try decode(Int64.self, atIndex: index) }
    func optionalInt(_ index: Int) throws -> Int64? { try decode(Int64?.self, atIndex: index) }
    func text(_ index: Int) throws -> String { try decode(String.self, atIndex: index) }
    func optionalText(_ index: Int) throws -> String? { try decode(String?.self, atIndex: index) }
    func bool(_ index: Int) throws -> Bool { try decode(Bool.self, atIndex: index) }
}
