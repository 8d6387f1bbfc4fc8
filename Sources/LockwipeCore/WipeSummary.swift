/// What a wipe did, honestly: a wipe with skipped entries is incomplete.
public struct WipeSummary: Codable, Sendable, Equatable {
    public struct Skipped: Codable, Sendable, Equatable {
        public var path: String
        public var reason: String
        public init(path: String, reason: String) {
            self.path = path
            self.reason = reason
        }
    }

    /// Regular files whose data was overwritten and made durable before they were unlinked.
    public var filesOverwritten: Int
    /// Bytes written over file data, all passes together.
    public var bytesOverwritten: Int64
    /// Names unlinked: files, symlinks, special files and directories.
    public var entriesRemoved: Int
    public var skipped: [Skipped]
    public var elapsedSeconds: Double
    /// Overwrite passes configured for this wipe (0 = unlink only).
    public var passes: Int
    /// "random" or "zeros".
    public var pattern: String
    /// Immutable or append-only attributes the wipe had to clear.
    public var attributesCleared: Int
    /// Crypto-erase (encrypted vaults): ISO 8601, UTC, when the key was destroyed (removed
    /// from the kernel and every wrapped copy deleted), and how many seconds after the wipe
    /// request. From that moment the data is unrecoverable; the files removed afterwards
    /// are ciphertext, so no overwrite pass is needed.
    public var keyDestroyedAt: String?
    public var keyDestroyedSeconds: Double?
    /// What each vault is stored on, read before the erase.
    public var media: [MediaFacts] = []
    /// Where an overwrite could not reach old copies of the data (copy-on-write, snapshots,
    /// shared extents, flash). Empty when none was detected; never makes a wipe incomplete.
    public var caveats: [WipeCaveat] = []
    public var cryptoErased: Bool { keyDestroyedAt != nil }
    public var complete: Bool { skipped.isEmpty }

    public init(
        filesOverwritten: Int, bytesOverwritten: Int64, entriesRemoved: Int, skipped: [Skipped], elapsedSeconds: Double,
        passes: Int = 0, pattern: String = "random", attributesCleared: Int = 0
    ) {
        self.filesOverwritten = filesOverwritten
        self.bytesOverwritten = bytesOverwritten
        self.entriesRemoved = entriesRemoved
        self.skipped = skipped
        self.elapsedSeconds = elapsedSeconds
        self.passes = passes
        self.pattern = pattern
        self.attributesCleared = attributesCleared
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case filesOverwritten = "files_overwritten"
        case bytesOverwritten = "bytes_overwritten"
        case entriesRemoved = "entries_removed"
        case skipped
        case elapsedSeconds = "elapsed_seconds"
        case passes, pattern
        case attributesCleared = "attributes_cleared"
        case complete
        case keyDestroyedAt = "key_destroyed_at"
        case keyDestroyedSeconds = "key_destroyed_seconds"
        case media, caveats
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        filesOverwritten = try c.decode(Int.self, forKey: .filesOverwritten)
        bytesOverwritten = try c.decode(Int64.self, forKey: .bytesOverwritten)
        entriesRemoved = try c.decode(Int.self, forKey: .entriesRemoved)
        skipped = try c.decode([Skipped].self, forKey: .skipped)
        elapsedSeconds = try c.decode(Double.self, forKey: .elapsedSeconds)
        // Absent in reports stored by 0.1.0, which never overwrote.
        passes = try c.decodeIfPresent(Int.self, forKey: .passes) ?? 0
        pattern = try c.decodeIfPresent(String.self, forKey: .pattern) ?? "random"
        attributesCleared = try c.decodeIfPresent(Int.self, forKey: .attributesCleared) ?? 0
        keyDestroyedAt = try c.decodeIfPresent(String.self, forKey: .keyDestroyedAt)
        keyDestroyedSeconds = try c.decodeIfPresent(Double.self, forKey: .keyDestroyedSeconds)
        // Absent in reports stored by versions that read no media facts.
        media = try c.decodeIfPresent([MediaFacts].self, forKey: .media) ?? []
        caveats = try c.decodeIfPresent([WipeCaveat].self, forKey: .caveats) ?? []
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(filesOverwritten, forKey: .filesOverwritten)
        try c.encode(bytesOverwritten, forKey: .bytesOverwritten)
        try c.encode(entriesRemoved, forKey: .entriesRemoved)
        try c.encode(skipped, forKey: .skipped)
        try c.encode(elapsedSeconds, forKey: .elapsedSeconds)
        try c.encode(passes, forKey: .passes)
        try c.encode(pattern, forKey: .pattern)
        try c.encode(attributesCleared, forKey: .attributesCleared)
        try c.encode(complete, forKey: .complete)
        try c.encodeIfPresent(keyDestroyedAt, forKey: .keyDestroyedAt)
        try c.encodeIfPresent(keyDestroyedSeconds, forKey: .keyDestroyedSeconds)
        try c.encode(media, forKey: .media)
        try c.encode(caveats, forKey: .caveats)
    }
}
