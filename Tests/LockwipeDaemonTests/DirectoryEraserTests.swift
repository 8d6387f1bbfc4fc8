import Foundation
import LockwipeCore
@testable import LockwipeDaemon
import Testing

/// The wipe must empty the vault and change nothing outside it: canaries beside symlinks
/// and hard links are compared byte for byte before and after.
@Suite struct DirectoryEraserTests {
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
        badName.append(CChar(bitPattern: 0xff)); badName.append(0)
        let fd = open(badName, O_CREAT | O_WRONLY, 0o600)
        #expect(fd >= 0)
        close(fd)

        let before = try snapshot(outside)
        let summary = await DirectoryEraser().erase(directories: [vault])

        #expect(summary.complete, "skipped: \(summary.skipped)")
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
        let summary = await DirectoryEraser().erase(directories: [root + "/vault"])
        #expect(!summary.complete)
        #expect(fm.fileExists(atPath: root + "/target/keep"))
    }

    @Test func deepTreesDoNotExhaustTheStack() async throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let vault = root + "/vault"
        try fm.createDirectory(atPath: vault, withIntermediateDirectories: true)
        // 500 levels, built relative to descriptors (an absolute path would pass PATH_MAX).
        var dirfd = open(vault, O_RDONLY | O_DIRECTORY)
        for _ in 0..<500 {
            #expect(mkdirat(dirfd, "d", 0o700) == 0)
            let next = openat(dirfd, "d", O_RDONLY | O_DIRECTORY)
            close(dirfd)
            dirfd = next
        }
        close(dirfd)
        let summary = await DirectoryEraser().erase(directories: [vault])
        #expect(summary.complete)
        #expect(summary.entriesRemoved == 500)
        #expect(try fm.contentsOfDirectory(atPath: vault).isEmpty)
    }

    @Test func aMissingVaultIsAlreadyErased() async {
        let summary = await DirectoryEraser().erase(directories: ["/nonexistent/lockwipe-vault"])
        #expect(summary.complete)
        #expect(summary.entriesRemoved == 0)
    }
}
