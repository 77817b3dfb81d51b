import TicksProtocol

// The app's settings (`PATCH /app`): one row per setting that was ever set,
// its value as JSON; a setting without a row has its default.

extension SQLStore {
    public func appOptions() async throws -> AppOptions {
        guard schema.has(.appSettings) else { return AppOptions() }
        return try await engine.readOne { Self.appOptions() }
    }

    /// A change of how sends count unread (`AppOptions.UnreadCounting`)
    /// first waits for every send in flight and holds back the next ones
    /// (PostgreSQL: the channel table's lock, which each send's row lock on
    /// its channel conflicts with; SQLite's one writer already does), so that
    /// each send counts one way throughout. Back to `kept`, every member's
    /// count is folded into its kept count (`StoreSQL.foldUnreadCounts`), as
    /// the release before reads it.
    public func updateAppOptions(_ change: AppOptions.Change) async throws -> AppOptions {
        try schema.require(.appSettings)
        if change.unreadCounting != nil { try schema.require(.unreadPositions) }
        let rows = try change.rows()
        let locks = change.unreadCounting != nil && engine.dialect == .postgres
        return try await engine.write {
            (locks ? Step.execute("LOCK TABLE channel IN EXCLUSIVE MODE") : .done(())).then { _ in
                change.unreadCounting == .kept ? Step.execute(StoreSQL.foldUnreadCounts) : .done(())
            }.then { _ in
                Step.each(rows) { name, value in Step.execute(StoreSQL.setAppSetting(name, to: value)) }
            }.then { _ in Self.appOptions() }
        }
    }

    /// The app's settings as the transaction sees them (a schema that has them).
    static func appOptions() -> StoreProgram<AppOptions> {
        Step.rows(StoreSQL.appSettings).map { rows in
            try AppOptions(settings: Dictionary(uniqueKeysWithValues: rows.map { (try $0.text(0), try $0.text(1)) }))
        }
    }
}

extension StoreSQL {
    static let appSettings: StoreQuery = "SELECT name, value FROM app_setting"

    /// Every member's count as their kept count alone (`memberUnread` with
    /// `counted_at` at the channel's `counted`): what the release before,
    /// which reads `member.unread`, serves once sends keep counts again.
    static let foldUnreadCounts: StoreQuery = """
        UPDATE member SET unread = unread + (SELECT c.counted FROM channel c WHERE c.pk = member.channel_pk) - counted_at,
          counted_at = (SELECT c.counted FROM channel c WHERE c.pk = member.channel_pk)
        WHERE counted_at <> (SELECT c.counted FROM channel c WHERE c.pk = member.channel_pk)
        """

    static func setAppSetting(_ name: String, to value: String) -> StoreQuery {
        """
        INSERT INTO app_setting (name, value) VALUES (\(name), \(value))
        ON CONFLICT (name) DO UPDATE SET value = excluded.value
        """
    }
}
