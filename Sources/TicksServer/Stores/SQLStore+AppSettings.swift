import TicksProtocol

// The app's settings (`PATCH /app`): one row per setting that was ever set,
// its value as JSON; a setting without a row has its default.

extension SQLStore {
    public func appOptions() async throws -> AppOptions {
        guard schema.has(.appSettings) else { return AppOptions() }
        return try await engine.readOne { Self.appOptions() }
    }

    public func updateAppOptions(_ change: AppOptions.Change) async throws -> AppOptions {
        try schema.require(.appSettings)
        let rows = try change.rows()
        return try await engine.write {
            Step.each(rows) { name, value in Step.execute(StoreSQL.setAppSetting(name, to: value)) }
                .then { _ in Self.appOptions() }
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

    static func setAppSetting(_ name: String, to value: String) -> StoreQuery {
        """
        INSERT INTO app_setting (name, value) VALUES (\(name), \(value))
        ON CONFLICT (name) DO UPDATE SET value = excluded.value
        """
    }
}
