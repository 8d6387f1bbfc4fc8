import CLockwipeFS
import Foundation
import LockwipeBase
import LockwipeCore

/// Reading a vault's outbox (`[outbox] directory`) as root, safely, when its user may be
/// hostile: every vault is opened by `VaultPath.open` (its recorded identity, no mount over
/// it), the outbox and everything in it by `openat2` beneath the directory above it with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV` (no symlink, no `..`, nothing
/// mounted in it, FUSE included), first as `O_PATH` to check what was opened (a directory
/// or regular file owned by the vault's user, on the outbox's filesystem) and only then
/// reopened through that descriptor to read it. Bounded in files, bytes, entries and depth
/// (a tree a million deep is read 16 deep); what is left out is counted, what is skipped
/// said. The caller bounds it in time (`VaultCalls`).
package enum OutboxReader {
    package struct Limits: Sendable {
        package var maxBytes: Int
        package var maxFiles: Int
        package var maxDepth = OutboxConfiguration.maxDepth
        package init(maxBytes: Int, maxFiles: Int) {
            self.maxBytes = maxBytes
            self.maxFiles = maxFiles
        }
        /// The entries a walk looks at, at most (files and everything else).
        var maxEntries: Int { maxFiles * 4 + 1000 }
    }

    /// What a walk found.
    package struct Summary: Sendable, Equatable {
        /// The files taken (read, or counted).
        package var files = 0
        package var bytes = 0
        /// The oldest modification time among them, in seconds since the epoch.
        package var oldest: Int64?
        /// Files left in the vault because the limits were reached.
        package var leftOut = 0
        /// What was not taken, in words (at most 20 said; `skippedCount` counts all).
        package var skipped: [String] = []
        package var skippedCount = 0
        package init() {}

        mutating func skip(_ what: String) {
            skippedCount += 1
            if skipped.count < 20 { skipped.append(what) }
        }
    }

    /// One regular file of the outbox, opened for reading.
    package struct File {
        package var path: String
        package var fd: Int32
        package var mode: UInt32
        package var modified: Int64
        package var size: Int
    }

    static let resolve = lockwipe_resolve_beneath | lockwipe_resolve_no_symlinks | lockwipe_resolve_no_xdev | lockwipe_resolve_no_magiclinks

    /// Walks the outbox `relative` of each of `vaults` (belonging to `uid`); `take` is
    /// called for each regular file it takes, with a descriptor open for reading that it
    /// must not close, and returns the bytes it read. With `take` nil the files are only
    /// counted. A vault without the outbox directory has none; a vault that cannot be
    /// opened throws.
    package static func walk(
        vaults: [VaultDirectory], relative: String, uid: UInt32, limits: Limits, take: ((File) throws -> Int)? = nil
    ) throws -> Summary {
        var summary = Summary()
        var entries = 0
        for vault in vaults {
            let opened = try VaultPath.open(vault)
            defer { opened.close() }
            let outbox = lockwipe_openat2(opened.fd, relative, UInt64(O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), resolve)
            if outbox == -ENOENT { continue }
            guard outbox >= 0 else {
                summary.skip("\(vault.path)/\(relative): \(reason(-outbox)), not read")
                continue
            }
            defer { close(outbox) }
            var st = stat()
            guard fstat(outbox, &st) == 0, st.st_uid == uid || st.st_uid == 0 else {
                summary.skip("\(vault.path)/\(relative): not owned by the vault's user, not read")
                continue
            }
            try walkDirectory(outbox, path: vault.path + "/" + relative, device: st.st_dev, uid: uid, depth: 0, limits: limits, entries: &entries, summary: &summary, take: take)
        }
        return summary
    }

    private static func walkDirectory(
        _ pathFD: Int32, path: String, device: UInt, uid: UInt32, depth: Int, limits: Limits, entries: inout Int, summary: inout Summary,
        take: ((File) throws -> Int)?
    ) throws {
        let fd = reopen(pathFD, O_RDONLY | O_DIRECTORY)
        guard fd >= 0, let dir = fdopendir(fd) else {
            if fd >= 0 { close(fd) }
            summary.skip("\(path): cannot be read")
            return
        }
        defer { closedir(dir) }
        var names: [[CChar]] = []
        while let entry = readdir(dir) {
            let name = DirectoryEntry.name(of: entry)
            if name == [46, 0] || name == [46, 46, 0] { continue }
            entries += 1
            guard entries <= limits.maxEntries else {
                summary.leftOut += 1
                continue
            }
            names.append(name)
        }
        // In name order: two seals of the same outbox list it alike.
        names.sort { strcmp($0, $1) < 0 }
        for name in names {
            let display = path + "/" + String(decoding: name.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let child = name.withUnsafeBufferPointer { lockwipe_openat2(dirfd(dir), $0.baseAddress!, UInt64(O_PATH | O_NOFOLLOW | O_CLOEXEC), resolve) }
            guard child >= 0 else {
                summary.skip("\(display): \(reason(-child))")
                continue
            }
            defer { close(child) }
            var st = stat()
            guard fstat(child, &st) == 0 else {
                summary.skip("\(display): cannot be read")
                continue
            }
            guard st.st_uid == uid, st.st_dev == device else {
                summary.skip("\(display): not owned by the vault's user, or on another filesystem")
                continue
            }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                guard depth + 1 < limits.maxDepth else {
                    summary.skip("\(display): deeper than \(limits.maxDepth) directories")
                    continue
                }
                try walkDirectory(child, path: display, device: device, uid: uid, depth: depth + 1, limits: limits, entries: &entries, summary: &summary, take: take)
            case S_IFREG:
                let size = Int(st.st_size)
                guard summary.files < limits.maxFiles, summary.bytes + size <= limits.maxBytes else {
                    summary.leftOut += 1
                    continue
                }
                var taken = size
                if let take {
                    let readable = reopen(child, O_RDONLY | O_NOCTTY | O_NONBLOCK)
                    guard readable >= 0 else {
                        summary.skip("\(display): cannot be opened")
                        continue
                    }
                    defer { close(readable) }
                    taken = try take(File(path: display, fd: readable, mode: st.st_mode & 0o7777, modified: Int64(st.st_mtim.tv_sec), size: size))
                }
                summary.files += 1
                summary.bytes += taken
                let modified = Int64(st.st_mtim.tv_sec)
                summary.oldest = min(summary.oldest ?? modified, modified)
            default:
                summary.skip("\(display): not a regular file or directory")
            }
        }
    }

    /// Opens what the `O_PATH` descriptor `fd` refers to, for `flags` (systemd's
    /// `fd_reopen`): the object already checked, never a name looked up again.
    private static func reopen(_ fd: Int32, _ flags: Int32) -> Int32 {
        open("/proc/self/fd/\(fd)", flags | O_CLOEXEC)
    }

    private static func reason(_ code: Int32) -> String {
        switch code {
        case ELOOP: "a symlink, not followed"
        case EXDEV: "something is mounted there, not entered"
        case ENOTDIR: "not a directory"
        default: ErrorWords.sentence(code)
        }
    }

    /// Reads `file` to its end (at most `limit` bytes), handing each piece to `piece`;
    /// returns the bytes read.
    package static func read(_ file: File, limit: Int, _ piece: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var total = 0
        while total < limit {
            let want = min(buffer.count, limit - total)
            let n = buffer.withUnsafeMutableBytes { Glibc.read(file.fd, $0.baseAddress, want) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError("reading", file.path)
            }
            if n == 0 { break }
            try buffer.withUnsafeBytes { try piece(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            total += n
        }
        return total
    }
}
