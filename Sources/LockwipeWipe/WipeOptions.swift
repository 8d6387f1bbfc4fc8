/// How a wipe erases a vault (`[wipe]`).
public struct WipeOptions: Sendable, Equatable {
    public enum Pattern: String, Sendable, CaseIterable {
        /// A fresh AES-256-CTR keystream, a new key per wipe.
        case random
        case zeros
    }

    /// Overwrite passes over every regular file with one link (0 = unlink only). Each
    /// pass but the last is made durable before the next starts.
    public var passes = 1
    public var pattern: Pattern = .random
    /// Remove the vault directory itself too, instead of leaving it empty (and locked).
    public var removeRoot = false

    public init(passes: Int = 1, pattern: Pattern = .random, removeRoot: Bool = false) {
        self.passes = passes
        self.pattern = pattern
        self.removeRoot = removeRoot
    }

    /// More passes than this only cost time: one pass already makes the data
    /// unrecoverable on in-place filesystems.
    public static let maxPasses = 35
}
