/// Where timers, backoffs, throttles and timeouts get their time: the real
/// clocks in an app or a server, a test clock in tests, so a test advances
/// time instead of sleeping and a busy machine cannot make it late.
///
/// It holds `any Clock<Duration>` and reads it as durations since it was
/// made, so code can remember "when" without knowing the clock's `Instant`.
/// Times that are stored or sent (a retry time in a database row, a lease)
/// are wall-clock `Timestamp`s; `wallNow` gives them, and a test clock moves
/// it with the clock.
public struct TimeSource: Sendable {
    public let clock: any Clock<Duration>
    private let reading: @Sendable () -> Duration
    private let wall: @Sendable () -> Timestamp

    /// - Parameter wallNow: the wall-clock time; by default the system's.
    public init(clock: any Clock<Duration>, wallNow: @escaping @Sendable () -> Timestamp = { .now() }) {
        self.clock = clock
        self.reading = Self.reader(of: clock)
        self.wall = wallNow
    }

    /// The real clocks: `ContinuousClock` and the system's wall clock.
    public static var system: TimeSource { TimeSource(clock: ContinuousClock()) }

    /// The clock's time since this source was made.
    public var now: Duration { reading() }

    /// The wall-clock time, for times that are stored or sent.
    public var wallNow: Timestamp { wall() }

    /// Waits `duration` on the clock (returns at once for zero or less).
    public func sleep(for duration: Duration) async throws {
        try await clock.sleep(for: max(duration, .zero))
    }

    /// Waits until the clock reads `deadline` (a value of `now`).
    public func sleep(until deadline: Duration) async throws {
        try await sleep(for: deadline - now)
    }

    private static func reader<C: Clock<Duration>>(of clock: C) -> @Sendable () -> Duration {
        let origin = clock.now
        return { origin.duration(to: clock.now) }
    }
}
