import Foundation
import LockwipeCore
import Testing

@testable import LockwipeDaemon
@testable import LockwipeVaultIO
@testable import LockwipeWipe

/// A loop-mounted image of a file system made by `mkfs` (btrfs, ext4), in a temporary
/// directory, unmounted and removed afterwards (also when a test fails).
final class LoopFilesystem {
    let root: String
    let mountPoint: String
    let image: String
    private(set) var mounted = false

    /// nil, with the reason, where this machine cannot (not root, no such mkfs, no such
    /// file system in the kernel).
    static func make(_ type: String, mkfs: [String]) -> (LoopFilesystem?, String?) {
        guard getuid() == 0 else { return (nil, "needs root to loop-mount an image") }
        guard EncryptedFilesystem.run(["sh", "-c", "command -v \(mkfs[0])"]) == 0 else { return (nil, "\(mkfs[0]) is not installed") }
        _ = EncryptedFilesystem.run(["modprobe", type])
        guard let known = try? String(contentsOfFile: "/proc/filesystems", encoding: .utf8), known.contains("\t\(type)\n") else {
            return (nil, "this kernel has no \(type)")
        }
        let fs = LoopFilesystem()
        guard EncryptedFilesystem.run(["truncate", "-s", "256M", fs.image]) == 0, EncryptedFilesystem.run(mkfs + [fs.image]) == 0 else {
            return (nil, "\(mkfs.joined(separator: " ")) failed")
        }
        guard EncryptedFilesystem.run(["mount", "-o", "loop", fs.image, fs.mountPoint]) == 0 else { return (nil, "cannot loop-mount the image") }
        fs.mounted = true
        return (fs, nil)
    }

    /// A file system type with the `mkfs` command line that makes it.
    struct Kind: Sendable {
        let type: String
        let mkfs: [String]
        static let btrfs = Kind(type: "btrfs", mkfs: ["mkfs.btrfs", "-q", "-f"])
        static let ext4 = Kind(type: "ext4", mkfs: ["mkfs.ext4", "-q", "-F"])
    }

    /// Why this machine cannot make one of `kind`, nil when it can (found by making one), for
    /// a test's `.enabled(if:)`, so that a test that cannot run here shows as skipped.
    static func unavailable(_ kind: Kind) -> String? { make(kind.type, mkfs: kind.mkfs).1 }

    /// One for a test its `.enabled(if:)` let run: failing to make it now is a failure.
    static func required(_ kind: Kind) throws -> LoopFilesystem {
        let (made, why) = make(kind.type, mkfs: kind.mkfs)
        return try #require(made, Comment(rawValue: why ?? "no \(kind.type) file system"))
    }

    private init() {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("lwmedia-\(UUID().uuidString)").path
        mountPoint = root + "/mnt"
        image = root + "/fs.img"
        try? FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
    }

    deinit {
        if mounted, EncryptedFilesystem.run(["umount", mountPoint]) != 0 { _ = EncryptedFilesystem.run(["umount", "--lazy", mountPoint]) }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// The loop device the image is attached to ("loop3"), as losetup says.
    var loopDevice: String? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["losetup", "-j", image, "-O", "NAME", "-n"]
        let out = Pipe()
        p.standardOutput = out
        guard (try? p.run()) != nil else { return nil }
        p.waitUntilExit()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return text.split(separator: "\n").first.map { ($0.trimmingCharacters(in: .whitespaces) as NSString).lastPathComponent }
    }

    func output(_ arguments: [String]) -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = arguments
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return "" }
        p.waitUntilExit()
        return String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}

@Suite(.serialized) struct MediaProbeTests {
    func vault(_ path: String) throws -> VaultDirectory {
        var st = stat()
        #expect(lstat(path, &st) == 0)
        return VaultDirectory(path: path, identity: .init(st))
    }

    // Needs root, mkfs.btrfs and btrfs in the kernel: skipped (shown as skipped) without.
    /// A btrfs subvolume holding a vault, a read-only snapshot of it, and a reflinked copy:
    /// the probe names the file system, its UUID and the loop device with its backing file,
    /// and the survey finds the snapshot and the shared extents, changing nothing.
    @Test(.enabled(if: LoopFilesystem.unavailable(.btrfs) == nil, "needs root, a loop device, mkfs.btrfs and btrfs in the kernel"))
    func btrfsSnapshotsAndReflinksAreFound() throws {
        let fs = try LoopFilesystem.required(.btrfs)
        let home = fs.mountPoint + "/home"
        #expect(EncryptedFilesystem.run(["btrfs", "-q", "subvolume", "create", home]) == 0)
        let path = home + "/alice"
        #expect(mkdir(path, 0o700) == 0)
        let data = Data((0..<(256 * 1024)).map { _ in UInt8.random(in: 0...255) })
        #expect(FileManager.default.createFile(atPath: path + "/a.bin", contents: data))
        #expect(FileManager.default.createFile(atPath: path + "/b.bin", contents: data))
        #expect(EncryptedFilesystem.run(["cp", "--reflink=always", path + "/a.bin", path + "/a-copy.bin"]) == 0)
        sync()

        let v = try vault(path)
        var before = VaultSurvey.take(v, count: true, overwrite: true, maxOpenDirectories: 32)
        #expect(before.problem == nil)
        #expect(before.media?.filesystem == "btrfs")
        let uuid = fs.output(["btrfs", "filesystem", "show", fs.mountPoint])
        #expect(before.media?.filesystemUUID.map { uuid.contains("uuid: \($0)") } == true, "\(uuid) vs \(String(describing: before.media))")
        let loop = fs.loopDevice
        #expect(loop != nil && before.media?.devices.first?.name == loop)
        #expect(before.media?.devices.first?.backingFile == fs.image)
        #expect(before.census.files == 3 && before.census.sharedFiles == 2, "\(before.census)")
        #expect(Set(before.caveats.map(\.kind)) == [.copyOnWrite, .sharedExtents, .names])

        #expect(EncryptedFilesystem.run(["btrfs", "-q", "subvolume", "snapshot", "-r", home, fs.mountPoint + "/snap-1"]) == 0)
        let probe = try { () -> MediaProbe.Probe in
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { close(fd) }
            return MediaProbe.probe(fd: fd, path: path)
        }()
        #expect(probe.snapshots == 1 && !probe.isSnapshot, "\(probe)")
        let listing = try FileManager.default.contentsOfDirectory(atPath: path).sorted()
        before = VaultSurvey.take(v, count: true, overwrite: true, maxOpenDirectories: 32)
        #expect(Set(before.caveats.map(\.kind)) == [.copyOnWrite, .sharedExtents, .snapshots, .names])
        // Every file now shares its extents with the snapshot.
        #expect(before.census.sharedFiles == 3)
        #expect(try FileManager.default.contentsOfDirectory(atPath: path).sorted() == listing)
        #expect(FileManager.default.contents(atPath: path + "/b.bin") == data)

        // Inside the snapshot, the subvolume is itself a snapshot.
        let fd = open(fs.mountPoint + "/snap-1/alice", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(fd) }
        #expect(MediaProbe.probe(fd: fd, path: "snap").isSnapshot)
        // A crypto-erase (no overwrite) has no caveat: every old copy is ciphertext.
        #expect(VaultSurvey.take(v, count: true, overwrite: false, maxOpenDirectories: 32).caveats.isEmpty)
    }

    // Needs root and mkfs.ext4: skipped (shown as skipped) without.
    @Test(.enabled(if: LoopFilesystem.unavailable(.ext4) == nil, "needs root, a loop device and mkfs.ext4"))
    func ext4HasNoCopyOnWriteCaveat() throws {
        let fs = try LoopFilesystem.required(.ext4)
        let path = fs.mountPoint + "/vault"
        #expect(mkdir(path, 0o700) == 0)
        #expect(mkdir(path + "/sub", 0o700) == 0)
        #expect(FileManager.default.createFile(atPath: path + "/sub/f", contents: Data(repeating: 7, count: 10_000)))
        #expect(symlink("/etc/passwd", path + "/link") == 0)
        let survey = VaultSurvey.take(try vault(path), count: true, overwrite: true, maxOpenDirectories: 32)
        #expect(survey.media?.filesystem == "ext4")
        #expect(survey.census.files == 1 && survey.census.directories == 1 && survey.census.otherEntries == 1)
        #expect(survey.census.bytes >= 10_000)
        #expect(!survey.caveats.contains { $0.kind == .copyOnWrite || $0.kind == .snapshots || $0.kind == .sharedExtents })
        // A loop device on this machine's disk: rotational as the kernel says; the
        // non-rotational caveat follows that flag exactly.
        let flash = survey.media?.devices.contains { $0.rotational == false } ?? false
        #expect(survey.caveats.contains { $0.kind == .nonRotational } == flash)
    }
}
