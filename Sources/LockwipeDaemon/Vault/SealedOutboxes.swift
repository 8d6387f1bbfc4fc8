import CLockwipeFS
import Crypto
import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO

/// Sealed outboxes waiting for the policy server, one file each, in `outbox/` in the
/// state directory (0700, lockwiped's; files 0600): out of every user's reach, and
/// unreadable but with the organisation's private key (`OutboxSealer`). A file is written
/// unnamed (`O_TMPFILE`), `fsync`ed, then named `<registration id>-<sealed at>-<first 16
/// hex digits of its SHA-256>.lwo` and the directory `fsync`ed: a crash leaves the whole
/// file or nothing.
/// Every access works relative to the directory's descriptor (`openat` with
/// `O_NOFOLLOW`), as `KeyFiles` does.
struct SealedOutboxes: Sendable {
    static let directoryName = "outbox"
    static let suffix = ".lwo"

    let path: String

    init(stateDirectory: String) {
        path = stateDirectory + "/" + Self.directoryName
    }

    /// One sealed outbox kept here.
    struct Kept: Sendable, Equatable {
        var name: String
        var registration: RegistrationID
        var sealedAt: Int64
        var bytes: Int
    }

    /// What a seal did.
    struct Sealed: Sendable, Equatable {
        /// The file's name; nil when the outbox was empty (nothing kept).
        var name: String?
        var sha256: String
        var summary: OutboxReader.Summary
    }

    /// Whether `name` is a sealed outbox's name (and so cannot leave the directory).
    static func parse(_ name: String) -> Kept? {
        guard name.hasSuffix(suffix) else { return nil }
        let parts = name.dropLast(suffix.count).split(separator: "-")
        guard parts.count == 3, parts[0].count == 32, parts[2].count == 16,
            parts.allSatisfy({ $0.allSatisfy { $0.isHexDigit && !$0.isUppercase || $0.isNumber } }), let at = Int64(parts[1])
        else { return nil }
        return Kept(name: name, registration: RegistrationID(String(parts[0])), sealedAt: at, bytes: 0)
    }

    /// Seals the outbox `relative` of `vaults` into a new file (blocking: run it in a vault
    /// call). An empty outbox leaves no file.
    func seal(
        vaults: [VaultDirectory], relative: String, uid: UInt32, limits: OutboxReader.Limits, to recipient: RecoveryPublicKey, header: OutboxHeader
    ) throws -> Sealed {
        let dir = try openDirectory(create: true)
        defer { close(dir) }
        // An unnamed file (O_TMPFILE), named only once whole: a crash or a seal given up
        // leaves nothing behind.
        let fd = openat(dir, ".", O_WRONLY | lockwipe_o_tmpfile | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileSystemError("create a file in", path) }
        defer { close(fd) }
        var sealer = try OutboxSealer(to: recipient, header: header)
        var hash = SHA256()
        func flush() throws {
            let bytes = sealer.take()
            hash.update(data: bytes)
            try writeAll(fd, bytes)
        }
        try flush()
        let summary = try OutboxReader.walk(vaults: vaults, relative: relative, uid: uid, limits: limits) { file in
            try sealer.beginFile(path: file.path, mode: file.mode, modified: file.modified)
            // A file that grew since it was counted is taken up to the size it had.
            let read = try OutboxReader.read(file, limit: file.size) { piece in
                try sealer.append(piece)
                try flush()
            }
            try sealer.endFile()
            try flush()
            return read
        }
        try sealer.finish()
        try flush()
        let digest = hash.finalize().map { String(format: "%02x", $0) }.joined()
        guard summary.files > 0 else { return Sealed(name: nil, sha256: digest, summary: summary) }
        let name = "\(header.registration.rawValue)-\(header.sealedAt)-\(digest.prefix(16))\(Self.suffix)"
        guard fsync(fd) == 0 else { throw FileSystemError("fsync", path + "/" + name) }
        guard linkat(AT_FDCWD, "/proc/self/fd/\(fd)", dir, name, AT_SYMLINK_FOLLOW) == 0 || errno == EEXIST else {
            throw FileSystemError("name", path + "/" + name)
        }
        guard fsync(dir) == 0 else { throw FileSystemError("fsync", path) }
        return Sealed(name: name, sha256: digest, summary: summary)
    }

    /// What a seal before a lock, wipe or unregister came to.
    struct SealOutcome: Sendable, Equatable {
        /// In words, for the hooks (`LOCKWIPE_OUTBOX_SEALED`) and history.
        var words: String
        /// The file kept; nil when the outbox was empty or could not be sealed.
        var sealed: Sealed?
        var failed = false
    }

    /// What became of one sealed outbox's upload.
    struct Upload: Sendable, Equatable {
        var name: String
        var sha256: String
        var bytes: Int
        var answer: OutboxUploadAnswer
    }

    /// A sealed outbox's bytes (lockwiped's own file: regular, one link, 0600).
    func read(_ name: String) throws -> [UInt8] {
        guard Self.parse(name) != nil else { throw FileSystemError("read", path + "/" + name + " (not a sealed outbox's name)", code: EINVAL) }
        let dir = try openDirectory(create: false)
        defer { close(dir) }
        let fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystemError("open", path + "/" + name) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystemError("stat", path + "/" + name) }
        guard st.st_mode & S_IFMT == S_IFREG, st.st_nlink == 1, st.st_uid == geteuid(), st.st_mode & 0o077 == 0 else {
            throw FileSystemError("use", path + "/" + name + " (a sealed outbox must be a regular file with one link, lockwiped's, mode 0600)", code: EPERM)
        }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw FileSystemError("read", path + "/" + name, code: n < 0 ? errno : EIO) }
            done += n
        }
        return bytes
    }

    /// Removes a sealed outbox (received by the server, or destroyed with its vault by
    /// the offline policy's wipe); one already gone is fine.
    func remove(_ name: String) throws {
        guard Self.parse(name) != nil else { throw FileSystemError("remove", path + "/" + name + " (not a sealed outbox's name)", code: EINVAL) }
        let dir = try openDirectory(create: false)
        defer { close(dir) }
        guard unlinkat(dir, name, 0) == 0 || errno == ENOENT else { throw FileSystemError("remove", path + "/" + name) }
        guard fsync(dir) == 0 else { throw FileSystemError("fsync", path) }
    }

    /// The sealed outboxes kept for `registration`, oldest first.
    func kept(for registration: RegistrationID) throws -> [Kept] {
        try all().filter { $0.registration == registration }
    }

    /// Every sealed outbox kept here, oldest first.
    func all() throws -> [Kept] {
        let dir: Int32
        do {
            dir = try openDirectory(create: false)
        } catch let error as FileSystemError where error.code == ENOENT {
            return []
        }
        defer { close(dir) }
        var found: [Kept] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: path) {
            guard var k = Self.parse(name) else { continue }
            var st = stat()
            guard fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
                if errno == ENOENT { continue }
                throw FileSystemError("stat", path + "/" + name)
            }
            k.bytes = Int(st.st_size)
            found.append(k)
        }
        return found.sorted { ($0.sealedAt, $0.name) < ($1.sealedAt, $1.name) }
    }

    /// Opens the directory (created 0700 when `create` and missing), refusing a symlink
    /// and a directory someone else owns or can enter.
    private func openDirectory(create: Bool) throws -> Int32 {
        try openPrivateDirectory(path, create: create)
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var done = 0
        try bytes.withUnsafeBytes { buffer in
            while done < buffer.count {
                let n = write(fd, buffer.baseAddress! + done, buffer.count - done)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { throw FileSystemError("write a sealed outbox in", path, code: n < 0 ? errno : EIO) }
                done += n
            }
        }
    }
}
