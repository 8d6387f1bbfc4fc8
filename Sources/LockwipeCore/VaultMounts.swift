/// What is mounted on or inside a vault, and what a lock or wipe does about it: pure
/// functions over the text of `/proc/self/mountinfo` (proc(5)), tested as tables.
///
/// A user may mount a FUSE filesystem on a directory she owns, so on her own vault or on
/// any directory inside it. Root is refused by such a mount (the kernel lets only the
/// mounting user in, unless `allow_other`), and a server that never answers stalls every
/// call that enters it. A lock or wipe therefore never crosses into such a mount: it
/// detaches it first (in the daemon's own mount namespace) and acts on the directory
/// underneath. Filesystems root mounted there are left alone: an administrator may have
/// put them there on purpose, and the wipe does not enter them (it says so).
public struct MountEntry: Sendable, Equatable, CustomStringConvertible {
    /// The mount id (field 1); `statx(STATX_MNT_ID)` and `/proc/PID/fdinfo` report the same.
    public var id: UInt64
    public var parentID: UInt64
    /// `st_dev` of the mounted filesystem (field 3, major:minor).
    public var major: UInt32
    public var minor: UInt32
    /// Where it is mounted, unescaped (field 5).
    public var mountPoint: String
    /// The filesystem type (`ext4`, `fuse.sshfs`, ...).
    public var fsType: String
    public var source: String
    /// The superblock's options (`user_id=1000,allow_other,...` for FUSE).
    public var superOptions: [String]

    public init(
        id: UInt64, parentID: UInt64, major: UInt32, minor: UInt32, mountPoint: String, fsType: String, source: String, superOptions: [String]
    ) {
        self.id = id
        self.parentID = parentID
        self.major = major
        self.minor = minor
        self.mountPoint = mountPoint
        self.fsType = fsType
        self.source = source
        self.superOptions = superOptions
    }

    /// `st_dev` as glibc's `makedev` encodes it.
    public var device: UInt64 {
        let ma = UInt64(major), mi = UInt64(minor)
        return ((ma & 0xffff_f000) << 32) | ((ma & 0x0000_0fff) << 8) | ((mi & 0xffff_ff00) << 12) | (mi & 0x0000_00ff)
    }

    /// FUSE (`fuse`, `fuse.NAME`, `fuseblk`): served by a process, possibly a user's.
    public var isFUSE: Bool { fsType == "fuse" || fsType == "fuseblk" || fsType.hasPrefix("fuse.") }

    /// The uid that mounted a FUSE filesystem (its `user_id=` option); nil for others,
    /// which only root can mount.
    public var fuseOwner: UInt32? {
        guard isFUSE else { return nil }
        for option in superOptions where option.hasPrefix("user_id=") {
            return UInt32(option.dropFirst("user_id=".count))
        }
        return nil
    }

    /// Whether users other than the owner (root among them) may enter it.
    public var allowsOthers: Bool { superOptions.contains("allow_other") }

    public var description: String {
        var text = "\(fsType) (\(source)) on \(mountPoint)"
        if let owner = fuseOwner { text += ", mounted by uid \(owner)" }
        return text
    }
}

public enum MountTable {
    /// The entries of a `/proc/PID/mountinfo` text, in its order (a later entry on the same
    /// mount point is mounted over an earlier one). Lines that do not parse are left out:
    /// the kernel writes this text, and a field added by a newer kernel must not stop a lock.
    public static func parse(_ text: String) -> [MountEntry] {
        text.split(separator: "\n").compactMap(entry)
    }

    static func entry(_ line: Substring) -> MountEntry? {
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        // id parent major:minor root mountpoint options [optional...] - fstype source superoptions
        guard fields.count >= 10, let dash = fields.firstIndex(of: "-"), dash >= 6, fields.count >= dash + 4,
            let id = UInt64(fields[0]), let parent = UInt64(fields[1])
        else { return nil }
        let numbers = fields[2].split(separator: ":")
        guard numbers.count == 2, let major = UInt32(numbers[0]), let minor = UInt32(numbers[1]) else { return nil }
        return MountEntry(
            id: id, parentID: parent, major: major, minor: minor, mountPoint: unescape(fields[4]), fsType: unescape(fields[dash + 1]),
            source: unescape(fields[dash + 2]), superOptions: fields[dash + 3].split(separator: ",").map { unescape($0) })
    }

    /// The kernel's octal escapes (`\040` space, `\011` tab, `\012` newline, `\134` backslash).
    static func unescape(_ field: Substring) -> String {
        guard field.contains("\\") else { return String(field) }
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var i = 0
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "\\"), i + 3 < utf8.count {
                let digits = utf8[(i + 1)...(i + 3)]
                if digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "7") }) {
                    bytes.append(digits.reduce(0) { $0 &* 8 &+ ($1 - UInt8(ascii: "0")) })
                    i += 4
                    continue
                }
            }
            bytes.append(utf8[i])
            i += 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// What a lock or wipe does about the mounts on and inside a vault before it acts.
public enum MountTakeback {
    public enum Action: Sendable, Equatable {
        /// Detach it (in the daemon's mount namespace) so the vault underneath is reached.
        case detach(reason: String)
        /// Leave it: the vault's own filesystem, or one root mounted there.
        case leave(reason: String)
    }

    public struct Step: Sendable, Equatable {
        public var mount: MountEntry
        public var action: Action
        public init(mount: MountEntry, action: Action) {
            self.mount = mount
            self.action = action
        }
    }

    /// Whether `mountPoint` is `vault` or lies inside it.
    public static func isAtOrInside(_ mountPoint: String, vault: String) -> Bool {
        let root = vault.count > 1 && vault.hasSuffix("/") ? String(vault.dropLast()) : vault
        return mountPoint == root || mountPoint.hasPrefix(root == "/" ? "/" : root + "/")
    }

    /// The steps for the vault at `vault` whose recorded device is `vaultDevice`, over the
    /// mount table `mounts`: every mount on or inside it, outermost first. A mount inside
    /// one that is detached goes with it and gets no step of its own.
    ///
    /// - A FUSE filesystem a user (uid ≠ 0) mounted is detached, whoever she is: only a
    ///   user who may write the directory can mount on it, and nothing of a registration is
    ///   meant to be served by a user's process.
    /// - The filesystem on the vault's own path whose device is the recorded one is the
    ///   vault itself (a vault may be the root of a filesystem of its own): left.
    /// - Any other mount was made by root (no user can mount anything else here): left,
    ///   and the wipe does not enter it.
    public static func plan(mounts: [MountEntry], vault: String, vaultDevice: UInt64?) -> [Step] {
        let root = vault.count > 1 && vault.hasSuffix("/") ? String(vault.dropLast()) : vault
        let byID = Dictionary(mounts.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var detached: Set<UInt64> = []
        var steps: [(index: Int, step: Step)] = []
        for (index, mount) in mounts.enumerated() where isAtOrInside(mount.mountPoint, vault: root) {
            let action = decide(mount, atVaultRoot: mount.mountPoint == root, vaultDevice: vaultDevice)
            if case .detach = action { detached.insert(mount.id) }
            steps.append((index, Step(mount: mount, action: action)))
        }
        // A mount inside one that is detached goes with it (MNT_DETACH takes the subtree).
        func insideDetached(_ mount: MountEntry) -> Bool {
            var parent = mount.parentID
            var hops = 0
            while let p = byID[parent], hops < mounts.count {
                if detached.contains(p.id) { return true }
                parent = p.parentID
                hops += 1
            }
            return false
        }
        return
            steps
            .filter { !insideDetached($0.step.mount) }
            // Outermost first; on one mount point the top one (mounted last) first.
            .sorted { a, b in
                let (la, lb) = (a.step.mount.mountPoint.utf8.count, b.step.mount.mountPoint.utf8.count)
                return la != lb ? la < lb : a.index > b.index
            }
            .map(\.step)
    }

    static func decide(_ mount: MountEntry, atVaultRoot: Bool, vaultDevice: UInt64?) -> Action {
        if let owner = mount.fuseOwner, owner != 0 {
            return .detach(reason: "a FUSE filesystem uid \(owner) mounted there")
        }
        if atVaultRoot, let device = vaultDevice, mount.device == device, !mount.isFUSE {
            return .leave(reason: "the vault's own filesystem")
        }
        return .leave(reason: "mounted by root; not entered")
    }
}
