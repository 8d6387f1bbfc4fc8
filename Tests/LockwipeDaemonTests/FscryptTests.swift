import Foundation
import LockwipeBase
import Testing

@testable import LockwipeDaemon
@testable import LockwipeVaultIO

/// A real fscrypt filesystem: an ext4 image made with `-O encrypt`, loop-mounted in a
/// temporary directory, unmounted and removed afterwards (also when a test fails).
final class EncryptedFilesystem {
    let root: String
    let mountPoint: String
    private(set) var mounted = false

    /// nil, with the reason, where this machine cannot do it (not root, no loop device,
    /// a kernel without ext4 encryption).
    static func make() -> (EncryptedFilesystem?, String?) {
        guard getuid() == 0 else { return (nil, "needs root to loop-mount an ext4 image") }
        guard FileManager.default.fileExists(atPath: "/sys/fs/ext4/features/encryption") else {
            return (nil, "this kernel's ext4 has no encryption (/sys/fs/ext4/features/encryption)")
        }
        let fs = EncryptedFilesystem()
        let image = fs.root + "/fs.img"
        guard run(["truncate", "-s", "64M", image]) == 0, run(["mkfs.ext4", "-q", "-O", "encrypt", image]) == 0 else {
            return (nil, "mkfs.ext4 -O encrypt failed")
        }
        guard run(["mount", "-o", "loop", image, fs.mountPoint]) == 0 else { return (nil, "cannot loop-mount the image") }
        fs.mounted = true
        return (fs, nil)
    }

    private init() {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("lwfscrypt-\(UUID().uuidString)").path
        mountPoint = root + "/mnt"
        try? FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
    }

    /// Unmounts and removes everything, also when a descriptor on the filesystem is still
    /// open (ARC may end `fs` before a test's `defer { close(fd) }` runs): then the mount is
    /// detached lazily, and the kernel frees it with the last descriptor.
    deinit {
        if mounted, Self.run(["umount", mountPoint]) != 0 { _ = Self.run(["umount", "--lazy", mountPoint]) }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Why this machine cannot make one, nil when it can: found once, by making one, for the
    /// suites' `.enabled(if:)` (so that a test that cannot run here shows as skipped).
    static let unavailable: String? = make().1

    /// One for a test its suite's `.enabled(if:)` let run: failing to make it now is a
    /// failure, not a skip.
    static func required() throws -> EncryptedFilesystem {
        let (made, why) = make()
        return try #require(made, Comment(rawValue: why ?? "no encrypted filesystem"))
    }

    @discardableResult
    static func run(_ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }
}

// Needs root, a loop device and a kernel whose ext4 has encryption: skipped (and shown as
// skipped) where this machine has not (EncryptedFilesystem.make() says which is missing).
@Suite(.serialized, .enabled(if: EncryptedFilesystem.unavailable == nil, "needs root, a loop device and ext4 with encryption")) struct FscryptTests {
    func randomKey() -> [UInt8] { (0..<Fscrypt.keySize).map { _ in UInt8.random(in: 0...255) } }

    func openDirectory(_ path: String) -> Int32 { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }

    @Test func lockedVaultIsCiphertextEvenForRootAndUnlocksByteIdentical() throws {
        let fs = try EncryptedFilesystem.required()
        let vault = fs.mountPoint + "/vault"
        #expect(mkdir(vault, 0o700) == 0)
        // Key operations go through the filesystem's root: a descriptor open inside the
        // vault would itself keep the key in use.
        let fd = openDirectory(fs.mountPoint)
        defer { close(fd) }
        let vaultFd = openDirectory(vault)
        #expect(try Fscrypt.policy(of: vaultFd, path: vault) == nil)
        #expect(Fscrypt.isSupported(fd: vaultFd))

        let key = randomKey()
        let id = try Fscrypt.encrypt(emptyDirectory: vaultFd, path: vault, key: key)
        #expect(try Fscrypt.policy(of: vaultFd, path: vault) == id)
        close(vaultFd)
        #expect(try Fscrypt.status(of: id, fd: fd, path: vault) == .present)
        let secret = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try secret.write(to: URL(fileURLWithPath: vault + "/report.bin"))

        #expect(try Fscrypt.removeKey(id, fd: fd, path: vault) == .removed)
        #expect(try Fscrypt.status(of: id, fd: fd, path: vault) == .absent)
        // The name is ciphertext now, and the contents cannot be opened, not even by root.
        let names = try FileManager.default.contentsOfDirectory(atPath: vault)
        #expect(names.count == 1 && names != ["report.bin"])
        let opened = open(vault + "/" + names[0], O_RDONLY)
        #expect(opened < 0 && errno == ENOKEY)  // "Required key not available"

        #expect(try Fscrypt.addKey(key, fd: fd, path: vault) == id)
        #expect(try Data(contentsOf: URL(fileURLWithPath: vault + "/report.bin")) == secret)
    }

    @Test func openFilesKeepTheKeyBusyUntilTheyClose() throws {
        let fs = try EncryptedFilesystem.required()
        let vault = fs.mountPoint + "/vault"
        mkdir(vault, 0o700)
        let fd = openDirectory(fs.mountPoint)
        defer { close(fd) }
        let vaultFd = openDirectory(vault)
        let id = try Fscrypt.encrypt(emptyDirectory: vaultFd, path: vault, key: randomKey())
        close(vaultFd)
        let holder = open(vault + "/open.txt", O_CREAT | O_RDWR, 0o600)
        #expect(holder >= 0)
        #expect(try Fscrypt.removeKey(id, fd: fd, path: vault) == .filesBusy)
        #expect(try Fscrypt.status(of: id, fd: fd, path: vault) == .incompletelyRemoved)
        close(holder)
        #expect(try Fscrypt.removeKey(id, fd: fd, path: vault) == .removed)
        #expect(try Fscrypt.status(of: id, fd: fd, path: vault) == .absent)
    }

    @Test func onlyEmptyDirectoriesOnFscryptFilesystemsCanBecomeVaults() throws {
        let fs = try EncryptedFilesystem.required()
        let vault = fs.mountPoint + "/full"
        mkdir(vault, 0o700)
        #expect(FileManager.default.createFile(atPath: vault + "/already-here", contents: Data("x".utf8)))
        let fd = openDirectory(vault)
        defer { close(fd) }
        #expect(throws: FileSystemError.self) { try Fscrypt.encrypt(emptyDirectory: fd, path: vault, key: randomKey()) }

        // /tmp's own filesystem (made without -O encrypt) cannot hold vaults.
        let plain = openDirectory(fs.root)
        defer { close(plain) }
        #expect(!Fscrypt.isSupported(fd: plain))
    }
}

// Needs root, a loop device and a kernel whose ext4 has encryption: skipped (and shown as
// skipped) where this machine has not (EncryptedFilesystem.make() says which is missing).
/// The fscrypt lock (the `VaultProtecting` of encrypted vaults) on a real filesystem.
@Suite(.serialized, .enabled(if: EncryptedFilesystem.unavailable == nil, "needs root, a loop device and ext4 with encryption")) struct FscryptLockTests {
    @Test func lockRemovesTheKeyEndingHoldersFirstAndUnlockAddsItBack() throws {
        let fs = try EncryptedFilesystem.required()
        let vault = fs.mountPoint + "/vault"
        #expect(FscryptLock.encryptionProblem(vault) == nil)  // missing: judged by its parent
        mkdir(vault, 0o700)
        #expect(FscryptLock.encryptionProblem(vault) == nil)
        let key = (0..<Fscrypt.keySize).map { _ in UInt8.random(in: 0...255) }
        let v = try VaultDirectory.current(vault)
        let id = try FscryptLock.encrypt(v, key: key)
        #expect(id.bytes == (try VaultKeys.keyIdentifier(key)))  // what registration checks
        #expect(FscryptLock.encryptionProblem(vault) != nil)  // already encrypted
        try Data("secret".utf8).write(to: URL(fileURLWithPath: vault + "/a.txt"))
        let lock = FscryptLock()
        #expect(!lock.isLocked([v]))

        // An open file keeps the key busy until its "holder" is ended: the lock retries.
        var holder: Int32 = open(vault + "/a.txt", O_RDONLY)
        var ended = 0
        try lock.lock([v], uid: 0) {
            ended += 1
            if holder >= 0 {
                close(holder)
                holder = -1
            }
            return []
        }
        #expect(ended >= 1)
        #expect(lock.isLocked([v]))
        #expect(try FileManager.default.contentsOfDirectory(atPath: vault) != ["a.txt"])
        try lock.lock([v])  // idempotent (start-up re-applies it)

        #expect(throws: FileSystemError.self) { try lock.unlock([], directories: [v], key: [UInt8](repeating: 1, count: 64)) }
        #expect(lock.isLocked([v]))
        try lock.unlock([], directories: [v], key: key)
        #expect(!lock.isLocked([v]))
        #expect(try String(contentsOfFile: vault + "/a.txt", encoding: .utf8) == "secret")
        // A vault that is gone (or renamed away) is never "locked".
        #expect(!lock.isLocked([VaultDirectory(path: fs.mountPoint + "/gone", identity: v.identity)]))
        withExtendedLifetime(fs) {}
    }

    @Test func aHolderThatIsNotEndedMakesTheLockFailLoudly() throws {
        let fs = try EncryptedFilesystem.required()
        let vault = fs.mountPoint + "/vault"
        mkdir(vault, 0o700)
        let v = try VaultDirectory.current(vault)
        _ = try FscryptLock.encrypt(v, key: (0..<64).map { UInt8($0) })
        let holder = open(vault + "/open.txt", O_CREAT | O_RDWR, 0o600)
        var lock = FscryptLock()
        lock.attempts = 2
        #expect(throws: FileSystemError.self) { try lock.lock([v], uid: 0, endHolders: { [] }) }
        #expect(!lock.isLocked([v]))
        close(holder)
        withExtendedLifetime(fs) {}
    }
}
