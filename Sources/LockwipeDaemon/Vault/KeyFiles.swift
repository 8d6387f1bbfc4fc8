import Foundation
import LockwipeBase
import LockwipeVaultIO

/// Wrapped vault keys, one file each, in `keys/` in the state directory (0700; files
/// 0600): the only place a wrapped key is ever written.
///
/// Why files and not the state database: SQLite writes every change of a page as a new
/// frame of its write-ahead log and frees those frames (WAL reset, `wal_checkpoint(TRUNCATE)`)
/// without overwriting them, so a wrapped key that was ever in the database survives in
/// freed blocks of the disk, beside `machine.key` (issue 12, finding 3). A file of its own
/// can be destroyed: `destroy` overwrites it in place with zeros, `fsync`s it, and only
/// then unlinks it. On ext4 (`data=ordered`, the default), xfs and f2fs without
/// compression an overwrite lands on the blocks that held the key; what this does not
/// cover is said in docs/key-material.md.
///
/// Every version of a key gets a fresh random name (`<32 hex>.key`), and the state
/// database names the current one (`vault_keys.key_file`). A passcode change writes the
/// new file, commits the new name, then destroys the old file: a crash at any point leaves
/// the file the database names, whole and usable, and at most one orphan, which the next
/// start destroys (`StateStore.destroyOrphanKeyFiles`). Nothing is ever renamed over a
/// key (that would free the old blocks without overwriting them).
///
/// Every access opens the directory without following symlinks and works relative to
/// its descriptor (`openat` with `O_EXCL`/`O_NOFOLLOW`), and refuses a directory or file
/// that is not owned by lockwiped's user or is open to group or others.
public struct KeyFiles: Sendable {
    public static let directoryName = "keys"
    static let suffix = ".key"
    /// A wrapped key file is a few hundred bytes; anything bigger is not one.
    static let maxSize = 16 << 10

    public let path: String

    public init(stateDirectory: String) {
        path = stateDirectory + "/" + Self.directoryName
    }

    /// Whether `name` has the form of a key file name (and so cannot escape the directory).
    static func isKeyFileName(_ name: String) -> Bool {
        guard name.hasSuffix(suffix) else { return false }
        let stem = name.dropLast(suffix.count)
        return stem.count == 32 && stem.allSatisfy { $0.isHexDigit && !$0.isUppercase }
    }

    /// Writes `wrapped` to a new file, durably (file and directory `fsync`ed), and returns
    /// its name.
    public func write(_ wrapped: WrappedKey) throws -> String {
        let dir = try openDirectory(create: true)
        defer { close(dir) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(wrapped)
        defer { data.resetBytes(in: 0..<data.count) }
        var random = try SecRandom.key(16)
        let name = random.map { String(format: "%02x", $0) }.joined() + Self.suffix
        random.wipe()
        let fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileSystemError("create", path + "/" + name) }
        var ok = false
        defer {
            close(fd)
            if !ok { unlinkat(dir, name, 0) }
        }
        try writeAll(fd, data, name)
        guard fsync(fd) == 0 else { throw FileSystemError("fsync", path + "/" + name) }
        guard fsync(dir) == 0 else { throw FileSystemError("fsync", path) }
        ok = true
        return name
    }

    public func read(_ name: String) throws -> WrappedKey {
        guard Self.isKeyFileName(name) else { throw KeyWrapError.malformed("'\(name)' is not a key file name") }
        let dir = try openDirectory(create: false)
        defer { close(dir) }
        let fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystemError("open", path + "/" + name) }
        defer { close(fd) }
        let size = try checkFile(fd, name)
        var bytes = [UInt8](repeating: 0, count: size)
        defer { bytes.wipe() }
        var done = 0
        while done < size {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, size - done, off_t(done)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw FileSystemError("read", path + "/" + name, code: n < 0 ? errno : EIO) }
            done += n
        }
        do {
            return try JSONDecoder().decode(WrappedKey.self, from: Data(bytes))
        } catch {
            throw KeyWrapError.malformed("\(path)/\(name) is not a wrapped key: \(error)")
        }
    }

    /// Destroys a key file: overwritten in place with zeros over its whole size, `fsync`ed,
    /// then unlinked and the directory `fsync`ed. A file that is already gone is fine (a
    /// resumed crypto-erase).
    public func destroy(_ name: String) throws {
        guard Self.isKeyFileName(name) else { throw KeyWrapError.malformed("'\(name)' is not a key file name") }
        let dir: Int32
        do {
            dir = try openDirectory(create: false)
        } catch let error as FileSystemError where error.code == ENOENT {
            return
        }
        defer { close(dir) }
        try destroy(name, in: dir)
    }

    private func destroy(_ name: String, in dir: Int32) throws {
        let fd = openat(dir, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return }
            throw FileSystemError("open", path + "/" + name)
        }
        do {
            defer { close(fd) }
            let size = try checkFile(fd, name, allowEmpty: true)
            if size > 0 {
                try writeAll(fd, Data(count: size), name)
                guard fsync(fd) == 0 else { throw FileSystemError("fsync", path + "/" + name) }
            }
        }
        guard unlinkat(dir, name, 0) == 0 || errno == ENOENT else { throw FileSystemError("unlink", path + "/" + name) }
        guard fsync(dir) == 0 else { throw FileSystemError("fsync", path) }
    }

    /// Names of every file in the directory (key files and anything else a crash left).
    public func names() throws -> [String] {
        let dir: Int32
        do {
            dir = try openDirectory(create: false)
        } catch let error as FileSystemError where error.code == ENOENT {
            return []
        }
        close(dir)
        return try FileManager.default.contentsOfDirectory(atPath: path).sorted()
    }

    /// Destroys every key file in the directory whose name is not in `keep`; returns the
    /// names destroyed. Files that do not have a key file's name are left alone (and named
    /// in the error thrown, so that someone looks at them).
    public func destroyAll(except keep: Set<String>) throws -> [String] {
        let dir: Int32
        do {
            dir = try openDirectory(create: false)
        } catch let error as FileSystemError where error.code == ENOENT {
            return []
        }
        defer { close(dir) }
        var destroyed: [String] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: path).sorted() where !keep.contains(name) {
            guard Self.isKeyFileName(name) else { continue }
            try destroy(name, in: dir)
            destroyed.append(name)
        }
        return destroyed
    }

    /// Opens the directory (created 0700 when `create` and missing), refusing a symlink
    /// and a directory someone else owns or can enter.
    private func openDirectory(create: Bool) throws -> Int32 {
        try openPrivateDirectory(path, create: create)
    }

    /// Checks an opened key file (regular, one link, lockwiped's, 0600 or tighter) and
    /// returns its size.
    private func checkFile(_ fd: Int32, _ name: String, allowEmpty: Bool = false) throws -> Int {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystemError("stat", path + "/" + name) }
        guard st.st_mode & S_IFMT == S_IFREG, st.st_nlink == 1, st.st_uid == geteuid(), st.st_mode & 0o077 == 0 else {
            throw FileSystemError("use", path + "/" + name + " (a key file must be a regular file with one link, owned by lockwiped's user, mode 0600)", code: EPERM)
        }
        guard (allowEmpty || st.st_size > 0), st.st_size <= Self.maxSize else {
            throw FileSystemError("read", path + "/" + name + " (\(st.st_size) bytes: not a wrapped key)", code: EINVAL)
        }
        return Int(st.st_size)
    }

    private func writeAll(_ fd: Int32, _ data: Data, _ name: String) throws {
        var done = 0
        try data.withUnsafeBytes { buffer in
            while done < buffer.count {
                let n = pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(done))
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { throw FileSystemError("write", path + "/" + name, code: n < 0 ? errno : EIO) }
                done += n
            }
        }
    }
}
