import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO

/// This machine's offline-code key (docs/offline-codes.md): `offline-code.key` in the state
/// directory, 0600 (the directory is 0700), beside `machine.key` and removed with it when
/// the package is purged. 37 bytes: the 5-byte machine id it was derived for, then the
/// 32-byte key (HKDF of the fleet secret; the fleet secret is never stored). Replacing it
/// overwrites the file in place (same size), as key files are: nothing is renamed over it.
struct OfflineCodeKeyFile: Sendable {
    static let fileName = "offline-code.key"
    static let size = 5 + 32
    static let machineIDPath = "/etc/machine-id"

    let path: String
    let directory: String

    init(stateDirectory: String) {
        self.directory = stateDirectory
        self.path = stateDirectory + "/" + Self.fileName
    }

    struct Contents: Sendable {
        var machine: UInt64
        var key: [UInt8]
    }

    /// The stored key, or nil when offline codes are not provisioned.
    func load() throws -> Contents? {
        guard var bytes = try SecretFile.read(path, size: Self.size) else { return nil }
        defer { bytes.withUnsafeMutableBytes { zeroSecurely($0) } }
        let machine = bytes.prefix(5).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Contents(machine: machine, key: Array(bytes[5..<Self.size]))
    }

    /// Stores `contents`: a new file created 0600 with O_EXCL, or the existing one
    /// overwritten in place; made durable with its directory. Returns whether a file was
    /// there (and was replaced).
    @discardableResult
    func store(_ contents: Contents) throws -> Bool {
        var bytes = (0..<5).reversed().map { UInt8(truncatingIfNeeded: contents.machine >> UInt64($0 * 8)) } + contents.key
        defer { for i in bytes.indices { bytes[i] = 0 } }
        precondition(bytes.count == Self.size)
        var fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        let replaced = fd < 0 && errno == EEXIST
        if replaced { fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { throw FileSystemError("create", path) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystemError("stat", path) }
        guard st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_nlink == 1 else {
            throw FileSystemError("replace", path + " (it is not a regular file of lockwiped's own)", code: EPERM)
        }
        guard fchmod(fd, 0o600) == 0 else { throw FileSystemError("chmod", path) }
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, Self.size, 0) }
        guard written == Self.size, ftruncate(fd, off_t(Self.size)) == 0, fsync(fd) == 0 else { throw FileSystemError("write", path) }
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
        return replaced
    }

    /// This machine's id as the codes of key epoch `epoch` carry it, from `/etc/machine-id`.
    static func thisMachine(path: String = machineIDPath, epoch: Int = 0) throws -> UInt64 {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw FileSystemError("read", path + " (offline codes name the machine by an id derived from it)", code: ENOENT)
        }
        guard text.contains(where: { !$0.isWhitespace }) else { throw FileSystemError("read", path + " (it is empty)", code: EINVAL) }
        return OfflineCode.machineID(fromMachineID: text, epoch: epoch)
    }
}
