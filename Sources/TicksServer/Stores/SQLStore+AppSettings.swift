import TicksProtocol

// The app's settings (`PATCH /app`): one row per setting that was ever set,
// its value as JSON; a setting without a row has its default.

extension SQLStore {
    /// A node held before `v15-unread-positions` counts kept, whatever the setting says.
    public func appOptions() async throws -> AppOptions {
        guard schema.has(.appSettings) else { return AppOptions() }
        return counted(try await engine.readOne { Self.appOptions() })
    }

    /// `options` as this node applies them: held before `v15-unread-positions`, it counts kept.
    private func counted(_ options: AppOptions) -> AppOptions {
        var options = options
        if !schema.has(.unreadPositions) { options.unreadCounting = .kept }
        return options
    }

    /// A change of how sends count unread (`AppOptions.UnreadCounting`)
    /// first waits for every send in flight and holds back the next ones
    /// (PostgreSQL: the channel table's lock, which each send's row lock on
    /// its channel conflicts with; SQLite's one writer already does), so that
    /// each send counts one way throughout. Back to `kept`, every member's
    /// count is folded into its kept count and every position set back to 0
    /// (`StoreSQL.foldUnreadCounts`), as the release before reads and writes
    /// them (a member it adds has `counted_at` 0).
    public func updateAppOptions(_ change: AppOptions.Change) async throws -> AppOptions {
        try schema.require(.appSettings)
        if change.unreadCounting != nil { try schema.require(.unreadPositions) }
        let rows = try change.rows()
        let locks = change.unreadCounting != nil && engine.dialect == .postgres
        let options = try await engine.write {
            (locks ? Step.execute("LOCK TABLE channel IN EXCLUSIVE MODE") : .done(())).then { _ in
                change.unreadCounting == .kept
                    ? Step.execute(StoreSQL.foldUnreadCounts).then { _ in Step.execute(StoreSQL.clearCounted) } : .done(())
            }.then { _ in
                Step.each(rows) { name, value in Step.execute(StoreSQL.setAppSetting(name, to: value)) }
            }.then { _ in Self.appOptions() }
        }
        return counted(options)
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

    /// Every member's count as their kept count alone, as of position 0
    /// (`memberUnread`, then `clearCounted`): what the release before, which
    /// reads `member.unread` and adds members at `counted_at` 0, serves once
    /// sends keep counts again.
    static let foldUnreadCounts: StoreQuery = """
        UPDATE member SET unread = \(memberUnread("member")), counted_at = 0
        WHERE counted_at <> 0 OR \(raw: channelCounted(of: "member")) <> 0
        """

    /// Every channel's position back to 0, after `foldUnreadCounts`.
    static let clearCounted: StoreQuery = "UPDATE channel SET counted = 0 WHERE counted <> 0"

    static func setAppSetting(_ name: String, to value: String) -> StoreQuery {
        """
        INSERT INTO app_setting (name, value) VALUES (\(name), \(value))
        ON CONFLICT (name) DO UPDATE SET value = excluded.value
        """
    }
}
