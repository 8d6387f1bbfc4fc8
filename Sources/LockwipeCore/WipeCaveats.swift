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
        if let names = leftNames(path: path, filesystem: f.media.filesystem) { caveats.append(names) }
        let flash = f.media.devices.filter { $0.rotational == false }.map(\.name)
        if !flash.isEmpty {
            caveats.append(
                WipeCaveat(
                    kind: .nonRotational, path: path,
                    detail: "on non-rotational media (\(flash.joined(separator: ", "))): flash remaps writes, and old pages may survive an overwrite until the device erases them"))
        }
        return caveats
    }

    // MARK: Names

    /// File systems on which an overwrite wipe removes the names of what it removed from
    /// the device: ext4 wipes a directory entry's name when the entry is removed (Linux
    /// 5.14), and the wipe writes the emptied directories to their place on the disk
    /// before removing them and then zeroes the journal (`EXT4_IOC_CHECKPOINT`). ext2 and
    /// ext3 report the same magic; without a journal the checkpoint fails, and that
    /// failure is the caveat (`namesNotCleared`).
    public static let nameClearing: Set<String> = ["ext4"]

    /// File systems with no device to keep names on.
    public static let memoryOnly: Set<String> = ["tmpfs"]

    /// The caveat for the names of an overwrite-wiped vault on `filesystem`, found
    /// before the wipe: nil where the wipe clears them (ext4) or nothing keeps them.
    public static func leftNames(path: String, filesystem: String) -> WipeCaveat? {
        if nameClearing.contains(filesystem) || memoryOnly.contains(filesystem) { return nil }
        let place = copyOnWrite.contains(filesystem) ? "its metadata trees, written to new blocks as they change," : "its directory blocks and its journal (or log)"
        return WipeCaveat(
            kind: .names, path: path,
            detail: "\(filesystem) keeps the names of removed files and directories in \(place) until the space is reused;"
                + " the overwrite reaches file contents, not names (an encrypted vault's names are encrypted)")
    }

    /// The caveat when the wipe could not clear the names on ext4 (`reason`: what failed).
    public static func namesNotCleared(path: String, reason: String) -> WipeCaveat {
        WipeCaveat(
            kind: .names, path: path,
            detail: "the names of removed files and directories may remain on the device (directory blocks, the journal): \(reason);"
                + " the overwrite reaches file contents, not names (an encrypted vault's names are encrypted)")
    }

    /// Whether the kernel wipes an ext4 directory entry's name when the entry is removed
    /// (Linux 5.14, "ext4: wipe ext4_dir_entry2 upon file deletion"), from `uname -r`'s
    /// release. An unreadable release counts as too old.
    public static func ext4WipesNames(kernelRelease: String) -> Bool {
        let numbers = kernelRelease.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard numbers.count == 2 else { return false }
        return (numbers[0], numbers[1]) >= (5, 14)
    }
}
