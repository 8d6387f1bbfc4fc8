/// What a vault is stored on, as far as the daemon can read it without touching the data:
/// the file system and the block device(s) under it. Part of a wipe's report and of its
/// sanitization certificate. Every fact the kernel does not expose is nil ("not
/// readable"), never guessed.
public struct MediaFacts: Codable, Sendable, Equatable {
    /// One block device under the file system (a btrfs file system may have several).
    public struct Device: Codable, Sendable, Equatable {
        /// The kernel's name of the device that holds the data: "sda", "nvme0n1", "loop3".
        public var name: String
        /// The partition the file system is on, when it is one: "sda2".
        public var partition: String?
        public var model: String?
        public var serial: String?
        /// From the block queue's `rotational` flag: false for flash (SSD, NVMe, eMMC).
        public var rotational: Bool?
        /// For a loop device: the file that backs it.
        public var backingFile: String?

        public init(
            name: String, partition: String? = nil, model: String? = nil, serial: String? = nil, rotational: Bool? = nil,
            backingFile: String? = nil
        ) {
            self.name = name
            self.partition = partition
            self.model = model
            self.serial = serial
            self.rotational = rotational
            self.backingFile = backingFile
        }

        // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
        enum CodingKeys: String, CodingKey {
            case name, partition, model, serial, rotational
            case backingFile = "backing_file"
        }
    }

    /// The vault these facts are about.
    public var path: String
    /// The file system type by its kernel name ("ext4", "btrfs", "xfs", "tmpfs"), or its
    /// magic number in hex ("0x9123683e") when the daemon does not know the name.
    public var filesystem: String
    /// The file system's UUID, when the kernel exposes it.
    public var filesystemUUID: String?
    public var devices: [Device]

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case path, filesystem, devices
        case filesystemUUID = "filesystem_uuid"
    }

    public init(path: String, filesystem: String, filesystemUUID: String? = nil, devices: [Device] = []) {
        self.path = path
        self.filesystem = filesystem
        self.filesystemUUID = filesystemUUID
        self.devices = devices
    }
}

/// Something about where a vault is stored that makes an overwrite unable to reach old
/// copies of its data. Said before a wipe (`wipe --dry-run`), in its report and in its
/// certificate.
public struct WipeCaveat: Codable, Sendable, Equatable, Hashable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// The file system writes new data to new blocks (btrfs, bcachefs, zfs): an
        /// overwrite leaves the old blocks as they were until the space is reused.
        case copyOnWrite = "copy-on-write"
        /// Snapshots share the vault's old blocks (btrfs): they keep the data after the wipe.
        case snapshots
        /// Files share extents with other files (reflinks, deduplication): only this
        /// file's name is removed; the shared data stays readable through the other file.
        case sharedExtents = "shared-extents"
        /// Flash media remap writes (wear levelling): old pages may survive an overwrite.
        case nonRotational = "non-rotational"
        /// Names of removed files and directories may stay on the device (directory
        /// blocks, the journal or log): the file system keeps them, or the wipe could not
        /// clear them (ext4's are cleared: `WipeCaveats.leftNames`).
        case names
    }

    public var kind: Kind
    /// The vault the caveat is about.
    public var path: String
    /// One sentence for people, with the numbers that were found.
    public var detail: String

    public init(kind: Kind, path: String, detail: String) {
        self.kind = kind
        self.path = path
        self.detail = detail
    }
}
