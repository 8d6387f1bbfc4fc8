import CLockwipeFS
import Foundation
import Synchronization
import Testing

@testable import LockwipeDaemon
@testable import LockwipeVaultIO

/// `VaultPath`: the one way a vault is reached (a walk from `/` that follows no symlink,
/// then the recorded device and inode), the registration's ancestor rule, and the
/// creation of a vault directory on a verified parent descriptor.
@Suite struct VaultPathTests {
    let fm = FileManager.default

    /// A root-owned 0755 directory under /tmp (sticky; its next component is root's).
    func makeTemp() throws -> String {
        let dir = "/tmp/lwvault-\(UUID().uuidString)"
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chmod(dir, 0o755)
        return dir
    }

    @Test func opensTheRecordedDirectoryAndRefusesAnotherInode() throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        try fm.createDirectory(atPath: root + "/a/vault", withIntermediateDirectories: true)
        let recorded = try VaultDirectory.current(root + "/a/vault")
        let opened = try VaultPath.open(recorded)
        #expect(opened.identity == recorded.identity)
        #expect(opened.name == "vault")
        opened.close()

        try fm.moveItem(atPath: root + "/a/vault", toPath: root + "/a/moved")
        #expect(throws: VaultOpenError.missing(path: root + "/a/vault", component: root + "/a/vault")) { _ = try VaultPath.open(recorded) }
        try fm.createDirectory(atPath: root + "/a/vault", withIntermediateDirectories: true)
        #expect {
            _ = try VaultPath.open(recorded)
        } throws: { error in
            if case .replaced = error as? VaultOpenError { return true }
            return false
        }
        #expect(throws: VaultOpenError.unrecorded(path: root + "/a/vault")) {
            _ = try VaultPath.open(VaultDirectory(path: root + "/a/vault", identity: nil))
        }
    }

    @Test(.enabled(if: geteuid() == 0, "mounting needs root"))
    func aMountOverTheVaultIsSeenNotEnteredAndTheTakebackLeavesRootsMounts() throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        try fm.createDirectory(atPath: root + "/vault", withIntermediateDirectories: true)
        let recorded = try VaultDirectory.current(root + "/vault")
        try #require(EncryptedFilesystem.run(["mount", "-t", "tmpfs", "-o", "size=1m", "lockwipe-test", root + "/vault"]) == 0)
        defer { EncryptedFilesystem.run(["umount", "-l", root + "/vault"]) }
        #expect {
            _ = try VaultPath.open(recorded)
        } throws: { error in
            guard case .mountedOver(_, let mount) = error as? VaultOpenError else { return false }
            return mount.contains("tmpfs")
        }
        // Root's tmpfs is not a user's FUSE filesystem: the takeback leaves it.
        let report = VaultMountTakeback.takeBack(recorded)
        #expect(report.detached.isEmpty && report.failed.isEmpty)
        #expect(report.left.map(\.mount.fsType) == ["tmpfs"])
        #expect(EncryptedFilesystem.run(["umount", root + "/vault"]) == 0)
        let opened = try VaultPath.open(recorded)
        #expect(opened.identity == recorded.identity)
        opened.close()
    }

    @Test func neverFollowsASymlinkInAnyComponent() throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        try fm.createDirectory(atPath: root + "/real/vault", withIntermediateDirectories: true)
        try fm.createSymbolicLink(atPath: root + "/link", withDestinationPath: root + "/real")
        #expect(throws: VaultOpenError.notADirectory(path: root + "/link/vault", component: root + "/link")) {
            _ = try VaultPath.walk(root + "/link/vault")
        }
        // Even with the identity of the directory the link leads to.
        let real = try VaultDirectory.current(root + "/real/vault")
        #expect(throws: VaultOpenError.self) { _ = try VaultPath.open(VaultDirectory(path: root + "/link/vault", identity: real.identity)) }
        #expect(throws: VaultOpenError.self) { _ = try VaultPath.walk(root + "/real/../real/vault") }
    }

    @Test func theAncestorRuleNamesEachUnsafeDirectory() throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        #expect(VaultPath.ancestorProblems(root + "/vault") == [])
        try fm.createDirectory(atPath: root + "/owned", withIntermediateDirectories: true)
        chown(root + "/owned", 65534, 65534)
        #expect(VaultPath.ancestorProblems(root + "/owned/vault").first?.contains("ancestor \(root)/owned is owned by uid 65534") == true)
        try fm.createDirectory(atPath: root + "/gw", withIntermediateDirectories: true)
        chmod(root + "/gw", 0o775)
        #expect(VaultPath.ancestorProblems(root + "/gw/vault").first?.contains("\(root)/gw is writable by group or other") == true)
        try fm.createDirectory(atPath: root + "/sticky/inner", withIntermediateDirectories: true)
        chmod(root + "/sticky", 0o1777)
        chmod(root + "/sticky/inner", 0o755)
        #expect(VaultPath.ancestorProblems(root + "/sticky/inner/vault") == [])
        #expect(VaultPath.ancestorProblems(root + "/sticky/vault").first?.contains("sticky") == true)
        try fm.createSymbolicLink(atPath: root + "/link", withDestinationPath: root + "/sticky")
        #expect(VaultPath.ancestorProblems(root + "/link/inner/vault").first?.contains("\(root)/link is a symlink") == true)
        #expect(VaultPath.ancestorProblems(root + "/missing/vault").first?.contains("does not exist") == true)
    }

    /// The mkdir/chown race, structurally: while a racer exchanges the new directory with
    /// a symlink to a root-owned file (renameat2 RENAME_EXCHANGE, as fast as it can),
    /// `create` either gives its user the directory it made, through its descriptor, or
    /// fails; the file the symlink points to is never given away. (Registration refuses
    /// such a user-writable parent anyway; this exercises `create` itself.)
    @Test func creatingUnderARenameExchangeRacerNeverChownsAnythingElse() throws {
        let root = try makeTemp()
        defer { try? fm.removeItem(atPath: root) }
        let target = root + "/root-file"
        try Data("root only".utf8).write(to: URL(fileURLWithPath: target))
        let parent = root + "/parent"
        try fm.createDirectory(atPath: parent, withIntermediateDirectories: true)
        let vault = parent + "/vault", decoy = parent + "/decoy"
        let stop = Atomic<Bool>(false)
        let swaps = Atomic<Int>(0)
        let racer = Thread {
            while !stop.load(ordering: .relaxed) {
                var st = stat()
                if lstat(vault, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
                    if lockwipe_rename_exchange(vault, decoy) == 0 { swaps.add(1, ordering: .relaxed) }
                }
            }
        }
        var created = 0
        var racing = false
        for _ in 0..<500 {
            for p in [vault, decoy] {
                var st = stat()
                if lstat(p, &st) == 0 { (st.st_mode & S_IFMT) == S_IFDIR ? rmdir(p) : unlink(p) }
            }
            symlink(target, decoy)
            // Started once, after the first symlink exists (isExecuting is false until
            // the new thread runs, so it cannot tell whether start() was called).
            if !racing {
                racer.start()
                racing = true
            }
            if let made = try? VaultPath.create(vault, uid: 65534, gid: 65534).directory {
                created += 1
                var st = stat()
                // The directory it made is the user's, wherever the racer put it.
                for p in [vault, decoy] where lstat(p, &st) == 0 && UInt64(st.st_ino) == made.identity?.inode {
                    #expect(st.st_uid == 65534)
                }
            }
            var t = stat()
            stat(target, &t)
            #expect(t.st_uid == 0, "the racer got the root-owned file chowned")
            if t.st_uid != 0 { break }
        }
        stop.store(true, ordering: .relaxed)
        while !racer.isFinished { usleep(1000) }
        #expect(created > 0)
        print("VaultPathTests: \(created) of 500 creations succeeded, \(swaps.load(ordering: .relaxed)) exchanges made; the target was never chowned")
    }
}
