import TicksProtocol
import TicksReceipts

/// The hearers' privacy a change's telling needs (`HearersPrivacy`, R15), read
/// in the change's own transaction after its writes: the app's reciprocal read
/// receipts (a move's with the reader's row, `StoreSQL.readerState`), and only
/// when they are on, which hearers hide their reads (`reads_shared`, kept on
/// users' and members' rows since `v11-all-members`). A schema held before
/// `v12-app-settings` has no setting: R15 is off there. PostgreSQL's batched
/// moves read the same inside `MovesFunction` (step 5), in their one round trip.
///
/// No guard: what is read shapes only whom the change's events go to, no
/// count or state is derived from it (docs/storage.md, "the hearers' privacy").
extension SQLStore {
    /// Each outcome with the privacy of those who may hear it: its recipients and the authors told "read
    /// by all". The outcome has the setting already (read with the reader's row, `outcome(of:…)`); the
    /// hearers who hide their reads are read only for the outcomes that found it on.
    static func withHearers(_ outcomes: [CursorOutcome]) -> StoreProgram<[CursorOutcome]> {
        let hearers = Set(outcomes.filter(\.hearers.reciprocal).flatMap { $0.recipients + $0.reachedAll.map(\.author) })
        guard !hearers.isEmpty else { return .done(outcomes) }
        return hidingReads(among: hearers).map { hiding in
            outcomes.map { outcome in
                guard outcome.hearers.reciprocal else { return outcome }
                var outcome = outcome
                outcome.hearers = HearersPrivacy(reciprocal: true, hidingReads: hiding)
                    .among(outcome.recipients + outcome.reachedAll.map(\.author))
                return outcome
            }
        }
    }

    /// A send with the privacy of the authors its "read by all" goes to; nothing read when there is none.
    static func withHearers(_ outcome: SendOutcome, schema: SchemaLevel) -> StoreProgram<SendOutcome> {
        let authors = outcome.reachedAll.filter { $0.kind == .read }.map(\.author)
        return hearersPrivacy(among: Set(authors), schema: schema).map { privacy in
            var outcome = outcome
            outcome.hearers = privacy
            return outcome
        }
    }

    /// The privacy of `channelPK`'s members and of `others` (who may have left: a play's author), for
    /// what every member may hear (a play, a thread read).
    static func membersPrivacy(of channelPK: Int64, and others: Set<String> = [], schema: SchemaLevel)
        -> StoreProgram<HearersPrivacy>
    {
        reciprocal(schema).then { reciprocal in
            guard reciprocal else { return .done(HearersPrivacy()) }
            return Fetch.texts(StoreSQL.membersHidingReads(in: channelPK)).then { members in
                hidingReads(among: others).map { HearersPrivacy(reciprocal: true, hidingReads: $0.union(members)) }
            }
        }
    }

    /// The privacy of `userIDs`: nothing read when there are none, one setting read when R15 is off.
    static func hearersPrivacy(among userIDs: Set<String>, schema: SchemaLevel) -> StoreProgram<HearersPrivacy> {
        guard !userIDs.isEmpty else { return .done(HearersPrivacy()) }
        return reciprocal(schema).then { reciprocal in
            guard reciprocal else { return .done(HearersPrivacy()) }
            return hidingReads(among: userIDs).map { HearersPrivacy(reciprocal: true, hidingReads: $0) }
        }
    }

    /// Those of `userIDs` who hide their reads (R10); nothing read when there are none.
    private static func hidingReads(among userIDs: Set<String>) -> StoreProgram<Set<String>> {
        guard !userIDs.isEmpty else { return .done([]) }
        let chunks = Array(userIDs).chunked(Fetch.idsPerStatement).map(Array.init)
        return Step.each(chunks) { Fetch.texts(StoreSQL.usersHidingReads($0)) }.map { Set($0.joined()) }
    }

    /// The app's reciprocal read receipts as the transaction sees them (off before `v12-app-settings`).
    private static func reciprocal(_ schema: SchemaLevel) -> StoreProgram<Bool> {
        guard schema.has(.appSettings) else { return .done(false) }
        let name = AppOptions.Change.CodingKeys.reciprocalReadReceipts.rawValue
        return Fetch.texts(StoreSQL.appSetting(name)).map { values in
            try AppOptions(settings: values.first.map { [name: $0] } ?? [:]).reciprocalReadReceipts
        }
    }
}

extension HearersPrivacy {
    /// This privacy narrowed to `userIDs` (one change of a batch).
    func among(_ userIDs: some Sequence<String>) -> HearersPrivacy {
        HearersPrivacy(reciprocal: reciprocal, hidingReads: hidingReads.intersection(userIDs))
    }
}

extension StoreSQL {
    /// Column 0: the value of the app setting `name` (JSON); no row when it was never set.
    static func appSetting(_ name: String) -> StoreQuery {
        "SELECT value FROM app_setting WHERE name = \(name)"
    }

    /// Column 0: the members of `channelPK` who hide their reads (R10), from their rows' copy of it.
    static func membersHidingReads(in channelPK: Int64) -> StoreQuery {
        "SELECT user_id FROM member WHERE channel_pk = \(channelPK) AND reads_shared = 0"
    }

    /// Column 0: those of `ids` who hide their reads (R10).
    static func usersHidingReads(_ ids: [String]) -> StoreQuery {
        "SELECT id FROM app_user WHERE reads_shared = 0 AND \(in: "id", ids)"
    }
}
