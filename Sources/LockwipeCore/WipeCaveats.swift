/// Which caveats apply to overwriting a vault, from what was read about its storage: a
/// pure function, tested as a table. An overwrite reaches the blocks a file holds when it
/// is overwritten; old copies elsewhere survive it. A crypto-erase has no caveat here:
/// every old copy of an encrypted vault's data is ciphertext under the destroyed key. An
/// unlink-only wipe (`passes = 0`) has none either: its method already says that the
/// data stays on the medium.
public enum WipeCaveats {
    /// What was read about one vault's storage.
    public struct Findings: Sendable, Equatable {
        public var media: MediaFacts
        /// Snapshots of the btrfs subvolume that holds the vault (nil: not known).
        public var snapshots: Int?
        /// The subvolume is itself a snapshot of another one (which shares its old blocks).
        public var isSnapshot: Bool
        /// Regular files with extents shared with other files or snapshots, and their bytes.
        public var sharedFiles: Int
        public var sharedBytes: Int64

        public init(media: MediaFacts, snapshots: Int? = nil, isSnapshot: Bool = false, sharedFiles: Int = 0, sharedBytes: Int64 = 0) {
            self.media = media
            self.snapshots = snapshots
            self.isSnapshot = isSnapshot
            self.sharedFiles = sharedFiles
            self.sharedBytes = sharedBytes
        }
    }

    /// File systems that write changed data to new blocks (copy-on-write).
    public static let copyOnWrite: Set<String> = ["btrfs", "bcachefs", "zfs"]

    public static func detect(_ f: Findings, overwrite: Bool) -> [WipeCaveat] {
        guard overwrite else { return [] }
        let path = f.media.path
        var caveats: [WipeCaveat] = []
        if copyOnWrite.contains(f.media.filesystem) {
            caveats.append(
                WipeCaveat(
                    kind: .copyOnWrite, path: path,
                    detail: "\(f.media.filesystem) writes changed data to new blocks: the overwrite leaves the old blocks as they were until the file system reuses them"))
        }
        var snapshotText: [String] = []
        if let n = f.snapshots, n > 0 { snapshotText.append("\(n) snapshot\(n == 1 ? "" : "s") of the subvolume holding the vault keep\(n == 1 ? "s" : "") its old blocks") }
        if f.isSnapshot { snapshotText.append("the subvolume holding the vault is itself a snapshot, and the subvolume it was taken from keeps the data it had then") }
        if !snapshotText.isEmpty {
            let detail = snapshotText.joined(separator: "; ") + "; the wipe cannot reach them (delete them with btrfs subvolume delete)"
            caveats.append(WipeCaveat(kind: .snapshots, path: path, detail: detail))
        }
        if f.sharedFiles > 0 {
            caveats.append(
                WipeCaveat(
                    kind: .sharedExtents, path: path,
                    detail: "\(f.sharedFiles) file\(f.sharedFiles == 1 ? "" : "s") (\(TextFormat.bytes(f.sharedBytes))) share extents with other files"
                        + " or snapshots (reflinks, deduplication): their shared data stays readable through the other copies"))
        }
        let flash = f.media.devices.filter { $0.rotational == false }.map(\.name)
        if !flash.isEmpty {
            caveats.append(
                WipeCaveat(
                    kind: .nonRotational, path: path,
                    detail: "on non-rotational media (\(flash.joined(separator: ", "))): flash remaps writes, and old pages may survive an overwrite until the device erases them"))
        }
        return caveats
    }
}
