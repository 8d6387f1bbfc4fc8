import LockwipeCore

/// `PreviewWipe` (`lockwipectl wipe --dry-run`): what a wipe of one vault would do now,
/// read without changing anything.
public struct WipePreview: Codable, Sendable, Equatable {
    public var user: String
    public var path: String
    public var method: Method
    public var passes: Int
    public var pattern: String
    /// Regular files with one link (what an overwrite writes over) and their bytes.
    public var files: Int
    public var bytes: Int64
    public var directories: Int
    /// Symlinks, hard-linked files, FIFOs, sockets, devices: only unlinked.
    public var otherEntries: Int
    /// Mount points inside the vault: a wipe would not enter them and be incomplete.
    public var mountPoints: [String]
    /// The walk stopped going deeper at its descriptor budget: the counts are a floor.
    public var partial: Bool
    public var media: MediaFacts?
    public var caveats: [WipeCaveat]
    /// Why the vault cannot be opened as registered: a wipe would not touch it.
    public var problem: String?

    public init(
        user: String, path: String, method: Method, passes: Int, pattern: String, files: Int, bytes: Int64, directories: Int,
        otherEntries: Int, mountPoints: [String], partial: Bool, media: MediaFacts?, caveats: [WipeCaveat], problem: String?
    ) {
        self.user = user
        self.path = path
        self.method = method
        self.passes = passes
        self.pattern = pattern
        self.files = files
        self.bytes = bytes
        self.directories = directories
        self.otherEntries = otherEntries
        self.mountPoints = mountPoints
        self.partial = partial
        self.media = media
        self.caveats = caveats
        self.problem = problem
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case user, path, method, passes, pattern, files, bytes, directories
        case otherEntries = "other_entries"
        case mountPoints = "mount_points"
        case partial, media, caveats, problem
    }
}

extension WipePreview {
    /// How a wipe would remove the vault's data; the raw values are the wire's words.
    public enum Method: String, Codable, Sendable, Equatable {
        /// Destroy the vault key, then unlink the ciphertext (an encrypted vault).
        case cryptoErase = "crypto-erase"
        /// Overwrite the files (`[wipe] passes`), then unlink.
        case overwrite
        /// Unlink without overwriting (`[wipe] passes = 0`).
        case unlink
    }
}

public struct WipePreviewReply: Codable, Sendable, Equatable {
    public var previews: [WipePreview]
    public init(previews: [WipePreview]) { self.previews = previews }
}
