import LockwipeCore

/// Where a directory is, as a walk over a user's tree reached it: its name and its
/// parent's `WalkPath`. Every directory below shares its ancestors' names, so the walk
/// holds one name per level of the chain it is in, never a path per level: a path string
/// per stack frame made a wipe's memory grow with the square of the depth (1.2 GB at 3,000
/// levels of 255-byte names, 51 GB at 20,000, for 80 MB on disk). A path is spelled out
/// only to report it (`text`, `EntryPath`), shortened past `ReportedPath.limit`.
final class WalkPath: Sendable {
    private let parent: WalkPath?
    /// Its name in its parent, with the NUL (as `WipeRun.name(of:)` reads it); for the
    /// vault root its whole path.
    let name: [CChar]
    /// The vault root's path as registered (one string shared by every node).
    let root: String
    /// Levels below the vault root (0 for the root).
    let depth: Int
    /// Bytes of the whole path, without a NUL.
    let length: Int

    /// The vault root, `path` as registered.
    init(root path: String) {
        parent = nil
        name = Array(path.utf8CString)
        root = path
        depth = 0
        length = name.count - 1
    }

    /// The directory `name` (with its NUL) in `parent`.
    init(_ name: [CChar], in parent: WalkPath) {
        self.parent = parent
        self.name = name
        root = parent.root
        depth = parent.depth + 1
        length = parent.length + name.count  // "/" + the name, without its NUL
    }

    /// The path of this directory, or of `entry` (a name with its NUL) in it, to report:
    /// whole up to `ReportedPath.limit` bytes, else with directories left out in the middle.
    func text(_ entry: [CChar]? = nil) -> String {
        var components: [[CChar]] = []  // innermost first
        if let entry { components.append(entry) }
        let whole = length + (entry.map(\.count) ?? 0)
        var node = self
        var collected = entry.map(\.count) ?? 0
        while let up = node.parent, whole <= ReportedPath.limit || collected <= ReportedPath.limit {
            components.append(node.name)
            collected += node.name.count
            node = up
        }
        let kept = ReportedPath.kept(rootLength: root.utf8.count, wholeLength: whole, lengths: components.map { $0.count - 1 })
        let omitted = depth + (entry == nil ? 0 : 1) - kept
        return ReportedPath.join(root: root, omitted: omitted, tail: components.prefix(kept).reversed().map(Self.string))
    }

    /// A name as text (not valid UTF-8: with replacement characters).
    static func string(_ name: [CChar]) -> String {
        String(decoding: name.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// An entry the walk met, named by its directory and its name (nil for the directory
/// itself): what a skipped entry, a batch's file or a failed removal keeps until it is
/// reported, instead of a path string each.
struct EntryPath: Sendable, CustomStringConvertible {
    var directory: WalkPath
    var name: [CChar]?

    var description: String { directory.text(name) }
}
