/// How long a test waits for what must happen (an answer, a frame, a state,
/// a store call) before it says it never came. Long on purpose: only a thing
/// that never happens should reach it, and a machine saturated beside the
/// suite (`scripts/test-under-load`: every CPU four times over, the disk
/// syncing, memory churning) can leave a task unscheduled for minutes. No
/// test asserts how fast anything is; time that a rule depends on runs on a
/// test's clock (`ManualClock`).
public enum Patience {
    /// The longest wait for anything that must happen.
    public static let wait: Duration = .seconds(600)
}
