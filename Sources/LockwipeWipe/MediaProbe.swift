import CLockwipeFS
import Foundation
import LockwipeCore

/// Reads what a vault is stored on, from the descriptor the wipe opened: the file system
/// (`fstatfs`), its UUID, the block devices under it from sysfs (model, serial,
/// rotational flag, a loop device's backing file), and for btrfs the snapshots that keep
/// the vault's old blocks. Only kernel interfaces are read (sysfs is the kernel's, not a
/// user's); a fact the kernel does not expose stays nil. Blocking: wipe thread or
/// `BlockingPool`.
enum MediaProbe {
    struct Probe: Sendable, Equatable {
        var facts: MediaFacts
        var snapshots: Int?
        var isSnapshot = false
    }

    static func probe(fd: Int32, path: String) -> Probe {
        var magic: UInt32 = 0
        _ = lockwipe_fs_magic(fd, &magic)
        var probe = Probe(facts: MediaFacts(path: path, filesystem: filesystemName(magic)))
        var st = stat()
        let dev = fstat(fd, &st) == 0 ? UInt64(st.st_dev) : 0
        if magic == btrfsMagic {
            var fsid = [UInt8](repeating: 0, count: 16)
            if lockwipe_btrfs_fsid(fd, &fsid) == 0 {
                let id = uuidString(fsid)
                probe.facts.filesystemUUID = id
                probe.facts.devices = btrfsDevices(fsid: id)
            }
            var tree: UInt64 = 0
            var uuid = [UInt8](repeating: 0, count: 16)
            var parent = [UInt8](repeating: 0, count: 16)
            if lockwipe_btrfs_subvolume(fd, &tree, &uuid, &parent) == 0 {
                probe.isSnapshot = parent.contains { $0 != 0 }
                // A subvolume without a UUID (made by an old kernel) cannot be matched.
                if uuid.contains(where: { $0 != 0 }) {
                    let n = lockwipe_btrfs_count_snapshots(fd, uuid)
                    probe.snapshots = n >= 0 ? Int(n) : nil
                }
            }
        } else {
            var uuid = [UInt8](repeating: 0, count: 16)
            // An all-zero UUID is the kernel's "none" (file systems without one).
            if lockwipe_fs_uuid(fd, &uuid) == 16, uuid.contains(where: { $0 != 0 }) { probe.facts.filesystemUUID = uuidString(uuid) }
            if major(dev) != 0 { probe.facts.devices = devices(sysfs: "/sys/dev/block/\(major(dev)):\(minor(dev))") }
        }
        return probe
    }

    static let btrfsMagic: UInt32 = 0x9123_683E

    /// File system magic numbers (linux/magic.h) by their kernel names.
    static let filesystemNames: [UInt32: String] = [
        0xEF53: "ext4", btrfsMagic: "btrfs", 0x5846_5342: "xfs", 0x0102_1994: "tmpfs", 0xCA45_1A4E: "bcachefs",
        0x2FC1_2FC1: "zfs", 0xF2F5_2010: "f2fs", 0x6969: "nfs", 0xFF53_4D42: "cifs", 0x794C_7630: "overlay",
        0x4D44: "vfat", 0x2011_BAB0: "exfat", 0x5346_544E: "ntfs", 0x6573_5546: "fuse", 0x3153_464A: "jfs",
        0x5265_4973: "reiserfs", 0x7461_636F: "ocfs2", 0x0102_1997: "9p",
    ]

    static func filesystemName(_ magic: UInt32) -> String {
        filesystemNames[magic] ?? "0x" + String(magic, radix: 16)
    }

    static func uuidString(_ b: [UInt8]) -> String {
        let hex = b.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }
        return [0..<4, 4..<6, 6..<8, 8..<10, 10..<16].map { hex[$0].joined() }.joined(separator: "-")
    }

    /// glibc's `gnu_dev_major`/`gnu_dev_minor`, which Swift does not import.
    static func major(_ dev: UInt64) -> UInt64 { ((dev >> 8) & 0xFFF) | ((dev >> 32) & ~0xFFF) }
    static func minor(_ dev: UInt64) -> UInt64 { (dev & 0xFF) | ((dev >> 12) & ~0xFF) }

    /// The devices of a btrfs file system: `/sys/fs/btrfs/<fsid>/devices/*` link to them.
    private static func btrfsDevices(fsid: String) -> [MediaFacts.Device] {
        let dir = "/sys/fs/btrfs/\(fsid)/devices"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
        return names.flatMap { devices(sysfs: dir + "/" + $0) }
    }

    /// The device at a sysfs block path, and the devices under it when it is a
    /// device-mapper or md device (LVM, LUKS, RAID: `slaves/`), where the model and serial
    /// are.
    static func devices(sysfs link: String, depth: Int = 0) -> [MediaFacts.Device] {
        guard depth < 4, let path = resolved(link) else { return [] }
        var disk = path
        var partition: String?
        if FileManager.default.fileExists(atPath: path + "/partition") {
            partition = (path as NSString).lastPathComponent
            disk = (path as NSString).deletingLastPathComponent
        }
        let name = (disk as NSString).lastPathComponent
        var device = MediaFacts.Device(name: name, partition: partition)
        device.model = read(disk + "/device/model")
        device.serial = read(disk + "/device/serial") ?? read(disk + "/serial") ?? vpdSerial(disk + "/device/vpd_pg80")
        device.rotational = read(disk + "/queue/rotational").map { $0 == "1" }
        device.backingFile = read(disk + "/loop/backing_file")
        let slaves = ((try? FileManager.default.contentsOfDirectory(atPath: path + "/slaves")) ?? []).sorted()
        return [device] + slaves.flatMap { devices(sysfs: path + "/slaves/" + $0, depth: depth + 1) }
    }

    private static func resolved(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }

    /// A sysfs attribute, trimmed; nil when absent, unreadable or empty.
    static func read(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines.union(.controlCharacters))
        return text.isEmpty ? nil : text
    }

    /// The unit serial number from SCSI VPD page 0x80: a 4-byte header (its length in
    /// byte 3), then ASCII.
    static func vpdSerial(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path), data.count > 4, data[data.startIndex + 1] == 0x80 else { return nil }
        let length = Int(data[data.startIndex + 3])
        let bytes = data.dropFirst(4).prefix(length)
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines.union(.controlCharacters))
        return text.isEmpty ? nil : text
    }
}
