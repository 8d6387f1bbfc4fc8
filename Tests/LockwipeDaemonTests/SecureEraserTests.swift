import CLockwipeFS
import Crypto
import CryptoExtras
import Foundation
import LockwipeCore
import LockwipeVaultIO
import Testing

@testable import LockwipeDaemon
@testable import LockwipeWipe

/// The wipe must empty the vault and change nothing outside it: canaries beside symlinks
/// and hard links are compared byte for byte before and after. The adversarial corpus at
/// scale (mounts, 10,000 levels, 100,000 files, races, kill -9) is in
/// IntegrationTests/system/test_wipe_engine.py, against the real daemon.
@Suite struct SecureEraserTests {
    let fm = FileManager.default

    func makeTemp() throws -> String {
        let dir = fm.temporaryDirectory.appendingPathComponent("lwerase-\(UUID().uuidString)").path
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    func snapshot(_ dir: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        for case let rel as String in fm.enumerator(atPath: dir)! {
            var st = stat()
            lstat(dir + "/" + rel, &st)
            out[rel] = (st.st_mode & S_IFMT) == S_IFREG ? try Data(contentsOf: URL(fileURLWithPath: dir + "/" + rel)) : Data("dir-or-link".utf8)
        }
        return out
    }

    @Test func emptiesTheVaultAndLeavesEverythingOutsideIntact() async throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let outside = root + "/outside"
        let vault = root + "/vault"
        try fm.createDirectory(atPath: outside + "/dir", withIntermediateDirectories: true)
        try Data("canary file".utf8).write(to: URL(fileURLWithPath: outside + "/canary"))
        try Data("canary in dir".utf8).write(to: URL(fileURLWithPath: outside + "/dir/inner"))
        try Data("hard linked".utf8).write(to: URL(fileURLWithPath: outside + "/hard"))
        try fm.createDirectory(atPath: vault + "/a/b/c", withIntermediateDirectories: true)
        try Data("secret".utf8).write(to: URL(fileURLWithPath: vault + "/a/b/c/secret"))
        try fm.createSymbolicLink(atPath: vault + "/abs-file", withDestinationPath: outside + "/canary")
        try fm.createSymbolicLink(atPath: vault + "/abs-dir", withDestinationPath: outside + "/dir")
        try fm.createSymbolicLink(atPath: vault + "/a/rel-dir", withDestinationPath: "../../outside/dir")
        try fm.createSymbolicLink(atPath: vault + "/dangling", withDestinationPath: root + "/nowhere")
        try fm.createSymbolicLink(atPath: vault + "/loop", withDestinationPath: vault + "/loop")
        #expect(link(outside + "/hard", vault + "/a/hard") == 0)
        #expect(mkfifo(vault + "/fifo", 0o600) == 0)
        var badName = Array((vault + "/bad-\u{1}\n").utf8CString.dropLast())
        badName.append(CChar(bitPattern: 0xff))
        badName.append(0)
        let fd = open(badName, O_CREAT | O_WRONLY, 0o600)
        #expect(fd >= 0)
        close(fd)

        let before = try snapshot(outside)
        let progress = WipeProgress()
        let summary = await SecureEraser().erase(directories: [try VaultDirectory.current(vault)], options: WipeOptions(), progress: progress)

        #expect(summary.complete, "skipped: \(summary.skipped)")
        // Only `secret` has data and one link: the hard link's data belongs to the canary.
        #expect(summary.filesOverwritten == 1)
        #expect(summary.bytesOverwritten == 6)
        #expect(summary.passes == 1 && summary.pattern == "random")
        let info = progress.info()
        #expect(info.phase == "erasing")
        #expect(info.entriesRemoved == summary.entriesRemoved && info.filesOverwritten == 1)
        #expect(info.bytesTotal == 6 && info.filesTotal == 2)  // secret and the empty bad name
        #expect(try fm.contentsOfDirectory(atPath: vault).isEmpty)
        #expect(try snapshot(outside) == before)
        var st = stat()
        #expect(stat(outside + "/hard", &st) == 0 && st.st_nlink == 1)
        #expect(summary.entriesRemoved == 12)  // a, a/b, a/b/c, secret, 3 links, dangling, loop, hard, fifo, bad name
    }

    @Test func aVaultThatIsASymlinkIsRefusedNotFollowed() async throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        try fm.createDirectory(atPath: root + "/target", withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: root + "/target/keep"))
        try fm.createSymbolicLink(atPath: root + "/vault", withDestinationPath: root + "/target")
        // The recorded inode is the target's; the path now leads through a symlink.
        let recorded = VaultDirectory(path: root + "/vault", identity: try VaultDirectory.current(root + "/target").identity)
        let summary = await SecureEraser().erase(directories: [recorded], options: WipeOptions(), progress: WipeProgress())
        #expect(!summary.complete)
        #expect(fm.fileExists(atPath: root + "/target/keep"))
    }

    /// Descriptors of this process that point into `root` (other tests run in parallel,
    /// so a plain count would not do).
    func openDescriptors(under root: String) -> [String] {
        let fds = (try? fm.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.compactMap { try? fm.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }.filter { $0.hasPrefix(root) }
    }

    /// Deeper than the descriptor budget (4 here): parents are re-opened through `..`,
    /// and the walk ends with no descriptor left open.
    @Test func deepTreesNeedNeitherStackNorDescriptors() async throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let vault = root + "/vault"
        try fm.createDirectory(atPath: vault, withIntermediateDirectories: true)
        // 1,500 levels with a file and a side directory every 100, built relative to
        // descriptors (an absolute path would pass PATH_MAX).
        var dirfd = open(vault, O_RDONLY | O_DIRECTORY)
        for level in 0..<1500 {
            #expect(mkdirat(dirfd, "d", 0o700) == 0)
            if level % 100 == 0 {
                let f = openat(dirfd, "f", O_CREAT | O_WRONLY, 0o600)
                _ = write(f, "data", 4)
                close(f)
                #expect(mkdirat(dirfd, "side", 0o700) == 0)
            }
            let next = openat(dirfd, "d", O_RDONLY | O_DIRECTORY)
            close(dirfd)
            dirfd = next
        }
        close(dirfd)
        let summary = await SecureEraser(maxOpenDirectories: 4, batchFiles: 3, batchDirectories: 2).erase(
            directories: [try VaultDirectory.current(vault)], options: WipeOptions(), progress: WipeProgress())
        #expect(summary.complete, "skipped: \(summary.skipped.prefix(3))")
        #expect(summary.entriesRemoved == 1500 + 15 + 15)
        #expect(summary.filesOverwritten == 15)
        #expect(try fm.contentsOfDirectory(atPath: vault).isEmpty)
        #expect(openDescriptors(under: root) == [])
    }

    /// Batches of two files finished on the worker while the walk goes on, directories
    /// removed after their files: everything inside goes, each entry counted once,
    /// nothing outside changes, no descriptor is left open.
    @Test func batchesFinishedBesideTheWalkRemoveEverythingOnce() async throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let vault = root + "/vault"
        let outside = root + "/outside"
        try fm.createDirectory(atPath: outside + "/dir", withIntermediateDirectories: true)
        try Data("canary".utf8).write(to: URL(fileURLWithPath: outside + "/canary"))
        for d in 0..<40 {
            let dir = vault + "/d\(d)/inner"
            try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
            for f in 0..<5 { try Data(repeating: UInt8(f + 1), count: 5_000 + f).write(to: URL(fileURLWithPath: dir + "/f\(f)")) }
        }
        #expect(link(outside + "/canary", vault + "/d7/inner/hard") == 0)
        try fm.createSymbolicLink(atPath: vault + "/d9/link", withDestinationPath: outside + "/dir")
        let before = try snapshot(outside)
        let summary = await SecureEraser(maxOpenDirectories: 4, batchFiles: 2, batchDirectories: 3).erase(
            directories: [try VaultDirectory.current(vault)], options: WipeOptions(), progress: WipeProgress())
        #expect(summary.complete, "skipped: \(summary.skipped.prefix(3))")
        #expect(summary.filesOverwritten == 200)
        #expect(summary.bytesOverwritten == 40 * (5 * 5_000 + 10))
        #expect(summary.entriesRemoved == 200 + 80 + 2)
        #expect(try fm.contentsOfDirectory(atPath: vault).isEmpty)
        #expect(try snapshot(outside) == before)
        #expect(openDescriptors(under: root) == [])
    }

    @Test(arguments: [
        // descriptor limit, open already -> files per batch (1,024 by default; 32
        // directories open, 32 per batch, 16 spare)
        (8192, 30, 1024), (1024, 30, 441), (160, 30, 9), (160, 200, 1), (64, 10, 1), (1 << 20, 30, 1024),
    ])
    func twoBatchesAndTheWalkFitUnderTheDescriptorLimit(limit: Int, inUse: Int, files: Int) {
        let engine = SecureEraser()
        #expect(WipeRun.batchFiles(engine: engine, descriptorLimit: limit, inUse: inUse) == files)
        if files > 1 {
            let used = inUse + WipeRun.spareDescriptors + engine.maxOpenDirectories + 2 * (engine.batchDirectories + files)
            #expect(used <= limit)
        }
    }

    /// Other tests open and close descriptors in this process at the same time, so the
    /// count is checked against 400 opened here with a margin, not to the unit.
    @Test func countsTheProcesssOpenDescriptors() throws {
        let before = try #require(WipeRun.openDescriptors())
        let fds = (0..<400).map { _ in open("/dev/null", O_RDONLY) }
        defer { for fd in fds { close(fd) } }
        #expect(fds.allSatisfy { $0 >= 0 })
        let after = try #require(WipeRun.openDescriptors())
        #expect((300...500).contains(after - before), "\(before) before, \(after) with 400 more open")
    }

    @Test func unlinkOnlyWhenPassesIsZeroAndTheRootGoesWhenAsked() async throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let vault = root + "/vault"
        try fm.createDirectory(atPath: vault + "/sub", withIntermediateDirectories: true)
        try Data(repeating: 7, count: 10_000).write(to: URL(fileURLWithPath: vault + "/sub/big"))
        let progress = WipeProgress()
        let summary = await SecureEraser().erase(
            directories: [try VaultDirectory.current(vault)], options: WipeOptions(passes: 0, removeRoot: true), progress: progress)
        #expect(summary.complete)
        #expect(summary.filesOverwritten == 0 && summary.bytesOverwritten == 0)
        #expect(summary.entriesRemoved == 3)  // big, sub, and the vault itself
        #expect(!fm.fileExists(atPath: vault))
        #expect(fm.fileExists(atPath: root))
        #expect(progress.info().bytesTotal == nil)  // no census without an overwrite
    }

    /// A vault that is missing (renamed away by its user, say) is never reported wiped.
    @Test func aMissingVaultIsNeverReportedErased() async {
        let missing = VaultDirectory(path: "/nonexistent/lockwipe-vault", identity: .init(device: 1, inode: 2))
        let summary = await SecureEraser().erase(directories: [missing], options: WipeOptions(), progress: WipeProgress())
        #expect(!summary.complete)
        #expect(summary.skipped.first?.reason.contains("missing") == true)
    }

    /// A directory at the recorded path that is not the recorded inode is not touched.
    @Test func aReplacedVaultIsNotTouched() async throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        try fm.createDirectory(atPath: root + "/vault", withIntermediateDirectories: true)
        let recorded = try VaultDirectory.current(root + "/vault")
        try fm.moveItem(atPath: root + "/vault", toPath: root + "/moved")
        try fm.createDirectory(atPath: root + "/vault", withIntermediateDirectories: true)
        try Data("other".utf8).write(to: URL(fileURLWithPath: root + "/vault/keep"))
        let summary = await SecureEraser().erase(directories: [recorded], options: WipeOptions(), progress: WipeProgress())
        #expect(!summary.complete)
        #expect(fm.fileExists(atPath: root + "/vault/keep"))
    }

    // MARK: The overwrite itself

    func fileWith(_ data: Data, in root: String) throws -> (path: String, fd: Int32) {
        let path = root + "/file"
        try data.write(to: URL(fileURLWithPath: path))
        return (path, open(path, O_RDWR))
    }

    func writer(_ pattern: WipeOptions.Pattern, direct: Bool = true) -> PatternWriter {
        PatternWriter(pattern: pattern, progress: WipeProgress(), direct: direct)
    }

    /// The file system of `path` overwrites in place and takes `O_DIRECT` (ext4, xfs).
    func inPlace(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(fd) }
        var magic: UInt32 = 0
        return fd >= 0 && lockwipe_fs_magic(fd, &magic) == 0 && WipeRun.inPlaceFileSystems.contains(magic)
    }

    /// Every byte is replaced and the last block is written whole (no read of it first),
    /// without allocating anything: only the size grows to the block's end. The count is
    /// the file's own bytes. The same with `O_DIRECT` and through the page cache.
    @Test(arguments: [true, false])
    func zerosReplaceEveryByteAndTheLastBlockWhole(direct: Bool) throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let original = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 | 1) })
        let (path, fd) = try fileWith(original, in: root)
        defer { close(fd) }
        #expect(fsync(fd) == 0)
        var before = stat()
        fstat(fd, &before)
        let zeros = writer(.zeros, direct: direct)
        let written = try zeros.overwrite(fd, size: 5000, granule: 4096, passes: 1).get()
        #expect(written == 5000)
        if direct && inPlace(root) {
            #expect(zeros.directWrites == 1 && zeros.bufferedWrites == 0)
        } else if !direct {
            #expect(zeros.directWrites == 0 && zeros.bufferedWrites == 1)
        }
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(after.count == 8192 && after.allSatisfy { $0 == 0 })
        #expect(fsync(fd) == 0)
        var now = stat()
        fstat(fd, &now)
        #expect(now.st_blocks <= before.st_blocks)
    }

    @Test(arguments: [
        // st_blksize, page size -> granule
        (4096, 4096, 4096), (1024, 4096, 1024), (65536, 4096, 4096), (4096, 65536, 4096), (0, 4096, 512),
    ])
    func theGranuleIsTheBlockAtMostAPage(blksize: Int, page: Int, granule: Int64) {
        var st = stat()
        st.st_blksize = blksize
        #expect(WipeRun.blockGranule(st, page: Int64(page)) == granule)
    }

    @Test func randomPassesWriteFreshKeystreamEveryTime() throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let original = Data(repeating: 0x41, count: 3 << 20)
        let (path, fd) = try fileWith(original, in: root)
        defer { close(fd) }
        let wipe = writer(.random)
        _ = try wipe.overwrite(fd, size: Int64(original.count), granule: 4096, passes: 1).get()
        let first = try Data(contentsOf: URL(fileURLWithPath: path))
        _ = try wipe.overwrite(fd, size: Int64(original.count), granule: 4096, passes: 1).get()
        let second = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(first.count == original.count && second.count == original.count)
        #expect(first != original && second != first)
        // No MiB repeats another.
        let chunks = Set(stride(from: 0, to: first.count, by: 1 << 20).map { first[$0..<($0 + (1 << 20))] })
        #expect(chunks.count == 3)
        // Keystream looks random: no byte value is far from 1/256 of the bytes.
        var counts = [Int](repeating: 0, count: 256)
        for b in first { counts[Int(b)] += 1 }
        let expected = first.count / 256
        #expect(counts.allSatisfy { abs($0 - expected) < expected / 10 })
    }

    /// The keystream is AES-256-CTR from counter 0 as swift-crypto (BoringSSL) computes
    /// it, encrypted into the buffer in place: a zeroed buffer becomes the keystream, a
    /// later fill XORs the next keystream bytes into what the buffer held, and a fill of
    /// part of the buffer leaves the rest alone. No keystream byte is used twice.
    @Test func theKeystreamIsAESCTRWrittenIntoTheBufferInPlace() throws {
        let key = SymmetricKey(size: .bits256)
        let mib = 1 << 20
        let stream = try AES._CTR.encrypt(
            Data(count: 3 * mib), using: key, nonce: AES._CTR.Nonce(nonceBytes: [UInt8](repeating: 0, count: 16)))
        let source = OverwriteSource(pattern: .random, key: key)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: mib, alignment: 4096)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0)

        source.fill(buffer)
        var expected = [UInt8](stream[0..<mib])
        #expect([UInt8](buffer) == expected)

        source.fill(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<1000]))
        for i in 0..<1000 { expected[i] ^= stream[mib + i] }
        #expect([UInt8](buffer) == expected)

        source.fill(buffer)
        for i in 0..<mib { expected[i] ^= stream[mib + 1000 + i] }
        #expect([UInt8](buffer) == expected)

        // Zeros leave the buffer as it is.
        OverwriteSource(pattern: .zeros).fill(buffer)
        #expect([UInt8](buffer) == expected)
    }

    /// Two writers (two sources) never write the same bytes: each has its own key.
    @Test func eachSourceHasItsOwnKey() {
        let one = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 4096)
        let two = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 4096)
        defer {
            one.deallocate()
            two.deallocate()
        }
        one.initializeMemory(as: UInt8.self, repeating: 0)
        two.initializeMemory(as: UInt8.self, repeating: 0)
        OverwriteSource(pattern: .random).fill(one)
        OverwriteSource(pattern: .random).fill(two)
        #expect([UInt8](one) != [UInt8](two))
        #expect(!one.allSatisfy { $0 == 0 })
    }

    @Test func holesInASparseFileStayHoles() throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let path = root + "/sparse"
        let fd = open(path, O_CREAT | O_RDWR, 0o600)
        defer { close(fd) }
        let size: Int64 = 1 << 30  // 1 GiB apparent, 8 KiB of data at each end
        #expect(pwrite(fd, [UInt8](repeating: 1, count: 8192), 8192, 0) == 8192)
        #expect(pwrite(fd, [UInt8](repeating: 1, count: 8192), 8192, off_t(size - 8192)) == 8192)
        var before = stat()
        fstat(fd, &before)
        let written = try writer(.zeros).overwrite(fd, size: size, granule: 4096, passes: 1).get()
        var after = stat()
        fstat(fd, &after)
        #expect(written == 16384)
        #expect(after.st_blocks <= before.st_blocks)
        #expect(after.st_size == before.st_size)
    }

    /// A range `O_DIRECT` refuses (here a length that is no multiple of the device's
    /// sector) is written through the page cache instead, whole: the wipe does not stop at
    /// a file system's alignment rules.
    @Test func whatODirectRefusesGoesThroughThePageCache() throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let original = Data(repeating: 0x5A, count: 1000)
        let (path, fd) = try fileWith(original, in: root)
        defer { close(fd) }
        let zeros = writer(.zeros)
        // A granule of 700 bytes: the write covers 1,400, which no block device aligns.
        let written = try zeros.overwrite(fd, size: 1000, granule: 700, passes: 1).get()
        #expect(written == 1000)
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(after.count == 1400 && after.allSatisfy { $0 == 0 })
        #expect(zeros.directWrites + zeros.bufferedWrites == 1)
        // ext4 and xfs refuse it, and it is written through the page cache; others (tmpfs)
        // may take any length.
        if inPlace(root) { #expect(zeros.directWrites == 0 && zeros.bufferedWrites == 1) }
    }

    /// `chattr +i` and `+a` are cleared (CAP_LINUX_IMMUTABLE, so root only).
    @Test(.enabled(if: getuid() == 0, "needs root to set immutable attributes"))
    func immutableAndAppendOnlyAreClearedAndCounted() async throws {
        let root = try makeTemp()
        defer {
            _ = try? run(["chattr", "-R", "-i", "-a", root])
            try? fm.removeItem(atPath: root)
        }
        let vault = root + "/vault"
        try fm.createDirectory(atPath: vault + "/dir", withIntermediateDirectories: true)
        try Data("frozen".utf8).write(to: URL(fileURLWithPath: vault + "/frozen"))
        try Data("log".utf8).write(to: URL(fileURLWithPath: vault + "/dir/log"))
        guard try run(["chattr", "+i", vault + "/frozen"]) == 0, try run(["chattr", "+a", vault + "/dir"]) == 0 else {
            Issue.record("this filesystem does not support chattr attributes")
            return
        }
        let summary = await SecureEraser().erase(directories: [try VaultDirectory.current(vault)], options: WipeOptions(), progress: WipeProgress())
        #expect(summary.complete, "skipped: \(summary.skipped)")
        #expect(summary.attributesCleared == 2)
        #expect(try fm.contentsOfDirectory(atPath: vault).isEmpty)
    }

    func run(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
