import CLockwipeFS
import Foundation
import LockwipeProtocol

/// Removes everything inside vault directories. The one seam every wipe goes through:
/// a stronger engine (crypto-erase) replaces the conformance, not callers.
public protocol VaultErasing: Sendable {
    /// Erases the contents of `directories`. Never throws: what could not be removed is in
    /// the summary's `skipped`, which makes the wipe incomplete. `progress` is updated as
    /// the wipe goes, for `status`.
    func erase(directories: [VaultDirectory], options: WipeOptions, progress: WipeProgress) async -> WipeSummary
}

/// The secure wipe engine: overwrites, then unlinks, everything inside each vault,
/// bottom-up, and reports exactly what it did.
///
/// Guarantees, because a wipe runs as root over directories users control:
/// - each vault is reached with `VaultPath.open`: no symlink anywhere on the way from `/`,
///   and the directory must be the recorded device and inode. A vault that is missing or
///   replaced is not wiped and is reported (the wipe stays incomplete and pending): a
///   renamed vault is never reported wiped;
/// - every step is relative to an open directory descriptor (`openat`, `fstatat`,
///   `unlinkat`); no path is resolved again from the top once the walk started. Going
///   back up to a parent whose descriptor was closed (to bound open descriptors) opens
///   `..` of the child and checks it is the same device and inode as before;
/// - symlinks are never followed (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`): a symlink is
///   unlinked as a symlink, so what it points to is untouched;
/// - other filesystems and mount points (`st_dev`, and statx mount ids for bind mounts)
///   are never entered; they are reported;
/// - a directory swapped between `readdir` and `openat` is detected (device and inode of
///   the opened descriptor) and not entered; one swapped for a symlink is unlinked;
/// - only regular files with one link are overwritten, checked on the opened descriptor.
///   A hard link to a file outside loses only this name; its data is never written;
/// - overwritten data is made durable (`syncfs` per batch) *before* the file is truncated
///   and unlinked: dirty pages of an unlinked file may never reach the disk, and a crash
///   after the unlink would leave the old data with no name left to resume from;
/// - depth and size are limited by neither the stack nor descriptors: the walk is
///   iterative and keeps at most `maxOpenDirectories` directories open.
public struct SecureEraser: VaultErasing {
    /// Directory descriptors kept open at most; deeper walks re-open parents through `..`.
    public var maxOpenDirectories: Int
    /// Overwritten files waiting for one `syncfs`, at most. They hold no descriptor: a
    /// file is closed once written, and found again by name (checked by inode) to unlink.
    public var batchFiles: Int
    /// Overwritten bytes waiting for one `syncfs`, at most.
    public var batchBytes: Int64
    /// Directories the batch's files are in, at most (each holds one descriptor).
    public var batchDirectories: Int

    public init(maxOpenDirectories: Int = 32, batchFiles: Int = 1024, batchBytes: Int64 = 256 << 20, batchDirectories: Int = 32) {
        self.maxOpenDirectories = max(2, maxOpenDirectories)
        self.batchFiles = max(1, batchFiles)
        self.batchBytes = max(1, batchBytes)
        self.batchDirectories = max(1, batchDirectories)
    }

    public func erase(directories: [VaultDirectory], options: WipeOptions, progress: WipeProgress) async -> WipeSummary {
        let started = ContinuousClock.now
        let engine = self
        let result = try? await runOnWipeThread { () -> WipeRun.Tally in
            let run = WipeRun(engine: engine, options: options, progress: progress)
            if options.passes > 0 {
                var files = 0
                var bytes: Int64 = 0
                for directory in directories { run.census(directory, files: &files, bytes: &bytes) }
                progress.setTotals(files: files, bytes: bytes * Int64(options.passes))
            }
            progress.startErasing()
            for directory in directories { run.erase(root: directory) }
            return run.tally
        }
        let tally = result ?? WipeRun.Tally(skipped: [.init(path: directories.map(\.path).joined(separator: ", "), reason: "the wipe thread could not run")])
        return WipeSummary(
            filesOverwritten: tally.filesOverwritten, bytesOverwritten: tally.bytesOverwritten,
            entriesRemoved: tally.removed, skipped: tally.skipped,
            elapsedSeconds: WipeProgress.seconds(ContinuousClock.now - started),
            passes: options.passes, pattern: options.pattern.rawValue, attributesCleared: tally.attributesCleared)
    }
}

/// One wipe, on one thread: the walk, the overwrite batch and the tally.
final class WipeRun {
    struct Tally: Sendable {
        var removed = 0
        var filesOverwritten = 0
        var bytesOverwritten: Int64 = 0
        var attributesCleared = 0
        var skipped: [WipeSummary.Skipped] = []
    }

    private struct Frame {
        var dir: OpaquePointer?
        var fd: Int32
        var dev: UInt64
        var ino: UInt64
        var path: String
        /// The name of this directory in its parent (nil for the vault root).
        var name: [CChar]?
    }

    /// An overwritten file waiting for the batch's `syncfs` before it may be unlinked.
    private struct Pending {
        var dirFd: Int32
        var name: [CChar]
        var path: String
        var dev: UInt64
        var ino: UInt64
        var bytes: Int64
    }

    private enum WalkEnd { case finished, lostWay, cancelled }

    static let cancelledReason = "stopped because the daemon is shutting down; the wipe resumes at the next start"

    private let engine: SecureEraser
    private let options: WipeOptions
    private let progress: WipeProgress
    private var source: OverwriteSource
    private(set) var tally = Tally()
    private var reported: Set<String> = []
    private var batch: [Pending] = []
    private var batchBytes: Int64 = 0
    /// Duplicated directory descriptors the batch unlinks through, closed at each flush.
    private var batchDirs: [(dev: UInt64, ino: UInt64, fd: Int32)] = []
    /// Device and inode of the vault root as the walk opened it: `remove_root` removes
    /// that directory and no other.
    private var rootIdentity: (dev: UInt64, ino: UInt64)?

    init(engine: SecureEraser, options: WipeOptions, progress: WipeProgress) {
        self.engine = engine
        self.options = options
        self.progress = progress
        self.source = OverwriteSource(pattern: options.pattern)
    }

    // MARK: Reporting

    private func skip(_ path: String, _ reason: String) {
        guard reported.insert(path).inserted else { return }
        tally.skipped.append(.init(path: path, reason: reason))
        progress.update { $0.skipped += 1 }
    }

    private func removed() {
        tally.removed += 1
        progress.update { $0.entriesRemoved += 1 }
    }

    private static func reason(_ code: Int32) -> String {
        switch code {
        case EPERM: return "operation not permitted"
        case EBUSY: return "busy (in use as a mount point?)"
        case ETXTBSY: return "busy (a running program)"
        default: return String(cString: strerror(code))
        }
    }

    /// The entry's name with its NUL, read in place. The record `readdir` returns is only
    /// as long as its name (`d_reclen`): copying the whole 256-byte `d_name` out of it, as
    /// `entry.pointee.d_name` does, can read past the end of glibc's buffer and crash
    /// (it did, resuming a crypto-erase, whose no-key names are long).
    static func name(of entry: UnsafeMutablePointer<dirent>) -> [CChar] {
        let start = UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \dirent.d_name)!)
            .assumingMemoryBound(to: CChar.self)
        return Array(UnsafeBufferPointer(start: start, count: strlen(start) + 1))
    }

    private static func child(_ parent: String, _ name: [CChar]) -> String {
        parent + "/" + String(decoding: name.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: The vault

    /// Empties (or removes, per `remove_root`) one vault. Entries that appear while the
    /// walk runs, or a walk that lost its way back up, lead to another walk (at most 3).
    func erase(root vault: VaultDirectory) {
        let root = vault.path
        for attempt in 1...3 {
            let skippedBefore = tally.skipped.count
            let end = progress.isCancelled ? .cancelled : walk(vault)
            if end == .cancelled {
                discardBatch()  // not durable yet: those files stay, and are overwritten again on resume
                return skip(root, Self.cancelledReason)
            }
            flush()
            guard let left = remainingEntries(vault) else { return }  // could not be opened: reported
            if left == 0 {
                if options.removeRoot { removeRoot(vault) }
                return
            }
            // Entries left because they were skipped are already reported.
            if end == .finished && tally.skipped.count > skippedBefore { return }
            if attempt == 3 {
                skip(root, "still holds \(left) entries after 3 walks (something keeps writing into it)")
            }
        }
    }

    /// Entries left in the root, or nil when the recorded root cannot be opened (reported).
    private func remainingEntries(_ vault: VaultDirectory) -> Int? {
        let opened: OpenedVault
        do {
            opened = try VaultPath.open(vault)
        } catch {
            skip(vault.path, "\(error)")
            return nil
        }
        close(opened.parent)
        let fd = opened.fd
        guard let dir = fdopendir(fd) else {
            close(fd)
            return 0
        }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let first = entry.pointee.d_name.0, second = entry.pointee.d_name.1, third = entry.pointee.d_name.2
            if first == 46 && (second == 0 || (second == 46 && third == 0)) { continue }
            count += 1
        }
        return count
    }

    private func removeRoot(_ vault: VaultDirectory) {
        let root = vault.path
        let opened: OpenedVault
        do {
            opened = try VaultPath.open(vault)
        } catch {
            return skip(root, "cannot be opened to remove it: \(error)")
        }
        close(opened.fd)
        let parentFd = opened.parent
        let name = Array(opened.name.utf8CString)
        defer { close(parentFd) }
        var st = stat()
        guard let identity = rootIdentity, fstatat(parentFd, name, &st, AT_SYMLINK_NOFOLLOW) == 0,
              UInt64(st.st_dev) == identity.dev, UInt64(st.st_ino) == identity.ino
        else { return skip(root, "was replaced during the wipe; not removed") }
        if unlinkat(parentFd, name, AT_REMOVEDIR) == 0 { removed() } else if errno != ENOENT {
            skip(root, "the emptied vault directory cannot be removed: \(Self.reason(errno))")
        }
    }

    // MARK: The walk

    private func walk(_ vault: VaultDirectory) -> WalkEnd {
        let root = vault.path
        let rootFd: Int32
        do {
            let opened = try VaultPath.open(vault)
            close(opened.parent)
            rootFd = opened.fd
        } catch {
            // Missing or replaced: nothing is touched, and the wipe is not complete.
            skip(root, "\(error)")
            return .finished
        }
        var rootStat = stat()
        guard fstat(rootFd, &rootStat) == 0, let rootDir = fdopendir(rootFd) else {
            skip(root, Self.reason(errno))
            close(rootFd)
            return .finished
        }
        rootIdentity = (UInt64(rootStat.st_dev), UInt64(rootStat.st_ino))
        var rootMount: UInt64 = 0
        let haveMountIDs = lockwipe_mount_id(rootFd, "", &rootMount) == 0
        clearAttributes(rootFd, root)

        var stack = [Frame(dir: rootDir, fd: rootFd, dev: UInt64(rootStat.st_dev), ino: UInt64(rootStat.st_ino), path: root, name: nil)]
        var openCount = 1
        defer {
            for frame in stack { if let dir = frame.dir { closedir(dir) } }
        }

        while let top = stack.indices.last {
            if progress.isCancelled { return .cancelled }
            errno = 0
            guard let entry = readdir(stack[top].dir!) else {
                if errno != 0 { skip(stack[top].path, "cannot be read: \(Self.reason(errno))") }
                let child = stack.removeLast()
                guard let parent = stack.indices.last, let name = child.name else {
                    closedir(child.dir!)
                    break
                }
                if stack[parent].fd < 0 {
                    // Its descriptor was closed to bound descriptors: go back up through
                    // `..` of the child and make sure it is the directory we came from.
                    let fd = openat(child.fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    var st = stat()
                    guard fd >= 0, fstat(fd, &st) == 0, UInt64(st.st_dev) == stack[parent].dev,
                          UInt64(st.st_ino) == stack[parent].ino, let dir = fdopendir(fd)
                    else {
                        if fd >= 0 { close(fd) }
                        closedir(child.dir!)
                        return .lostWay
                    }
                    stack[parent].fd = fd
                    stack[parent].dir = dir
                    openCount += 1
                }
                flush()  // the batch may hold files of this directory: they go first
                closedir(child.dir!)
                openCount -= 1
                if unlinkat(stack[parent].fd, name, AT_REMOVEDIR) == 0 {
                    removed()
                } else if errno != ENOENT && errno != ENOTEMPTY {
                    skip(child.path, Self.reason(errno))
                }
                // ENOTEMPTY: something inside was skipped, and that entry says why.
                continue
            }
            let name = Self.name(of: entry)
            if name == [46, 0] || name == [46, 46, 0] { continue }  // "." and ".."
            let type = entry.pointee.d_type
            let dirFd = stack[top].fd
            let path = Self.child(stack[top].path, name)

            if type != DirectoryType.directory && type != DirectoryType.unknown
                && !(type == DirectoryType.regular && options.passes > 0)
            {
                // Not a directory and nothing to overwrite: unlink by name, as `rm` does,
                // without a stat. unlinkat(…, 0) never removes a directory (EISDIR), so a
                // stale type only sends the entry to the careful path below.
                if unlinkat(dirFd, name, 0) == 0 {
                    removed()
                    continue
                }
                if errno == ENOENT { continue }
            }

            var st = stat()
            if fstatat(dirFd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                if errno != ENOENT { skip(path, Self.reason(errno)) }
                continue
            }
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                removeEntry(dirFd: dirFd, name: name, path: path, st: st)
                continue
            }
            var mount: UInt64 = 0
            let otherMount = haveMountIDs && lockwipe_mount_id(dirFd, name, &mount) == 0 && mount != rootMount
            if st.st_dev != rootStat.st_dev || otherMount {
                skip(path, "a mount point of another file system; not entered")
                continue
            }
            let childFd = openat(dirFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if childFd < 0 {
                let code = errno
                if code == ELOOP || code == ENOTDIR, fstatat(dirFd, name, &st, AT_SYMLINK_NOFOLLOW) == 0,
                   (st.st_mode & S_IFMT) != S_IFDIR
                {
                    // Swapped for a symlink or a file since readdir: remove that instead.
                    removeEntry(dirFd: dirFd, name: name, path: path, st: st)
                } else if code != ENOENT {
                    skip(path, Self.reason(code))
                }
                continue
            }
            var opened = stat()
            guard fstat(childFd, &opened) == 0, opened.st_dev == st.st_dev, opened.st_ino == st.st_ino,
                  let childDir = fdopendir(childFd)
            else {
                skip(path, "changed during the wipe; not entered")
                close(childFd)
                continue
            }
            clearAttributes(childFd, path)
            stack.append(Frame(dir: childDir, fd: childFd, dev: UInt64(opened.st_dev), ino: UInt64(opened.st_ino), path: path, name: name))
            openCount += 1
            if openCount > engine.maxOpenDirectories {
                // Open frames are always the deepest ones: close the shallowest of them.
                let lowest = stack.count - openCount
                closedir(stack[lowest].dir!)
                stack[lowest].dir = nil
                stack[lowest].fd = -1
                openCount -= 1
            }
        }
        return .finished
    }

    /// Removes a non-directory: regular files with one link are overwritten first (and
    /// unlinked after the batch is durable); everything else is only unlinked.
    private func removeEntry(dirFd: Int32, name: [CChar], path: String, st: stat) {
        if (st.st_mode & S_IFMT) == S_IFREG && st.st_nlink == 1 && options.passes > 0 {
            overwrite(dirFd: dirFd, name: name, path: path, expected: st)
            return
        }
        unlink(dirFd: dirFd, name: name, path: path, st: st)
    }

    private func unlink(dirFd: Int32, name: [CChar], path: String, st: stat) {
        if unlinkat(dirFd, name, 0) == 0 { return removed() }
        var code = errno
        if code == EPERM, clearEntryAttributes(dirFd: dirFd, name: name, path: path, st: st) {
            if unlinkat(dirFd, name, 0) == 0 { return removed() }
            code = errno
        }
        if code != ENOENT { skip(path, Self.reason(code)) }
    }

    // MARK: Attributes

    /// Clears immutable / append-only on an open file or directory, counting it; reports
    /// when the daemon may not (no CAP_LINUX_IMMUTABLE) or the filesystem has no flags.
    @discardableResult
    private func clearAttributes(_ fd: Int32, _ path: String) -> Bool {
        let result = lockwipe_clear_immutable(fd)
        if result > 0 {
            tally.attributesCleared += 1
            return true
        }
        if result == -EPERM || result == -EACCES {
            var flags: UInt32 = 0
            if lockwipe_get_inode_flags(fd, &flags) == 0, flags & (lockwipe_immutable_flag | lockwipe_append_flag) != 0 {
                skip(path, "immutable or append-only, and the daemon may not clear it (needs CAP_LINUX_IMMUTABLE)")
            }
        }
        return false
    }

    /// Clears the attributes of an entry that refused to be unlinked or opened. Only
    /// regular files, directories and FIFOs are opened for that (read-only, non-blocking):
    /// opening a device node can have effects of its own.
    private func clearEntryAttributes(dirFd: Int32, name: [CChar], path: String, st: stat) -> Bool {
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFREG || kind == S_IFDIR || kind == S_IFIFO else { return false }
        let fd = openat(dirFd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var opened = stat()
        guard fstat(fd, &opened) == 0, opened.st_dev == st.st_dev, opened.st_ino == st.st_ino else { return false }
        return clearAttributes(fd, path)
    }

    // MARK: Overwrite

    private func overwrite(dirFd: Int32, name: [CChar], path: String, expected: stat) {
        let flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC
        var fd = openat(dirFd, name, flags)
        if fd < 0, errno == EPERM, clearEntryAttributes(dirFd: dirFd, name: name, path: path, st: expected) {
            fd = openat(dirFd, name, flags)
        }
        guard fd >= 0 else {
            let code = errno
            var now = stat()
            if code == ELOOP || code == ENXIO || code == EISDIR, fstatat(dirFd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 {
                // No longer a regular file (swapped since readdir): handle what is there now.
                if (now.st_mode & S_IFMT) == S_IFDIR { return skip(path, "changed into a directory during the wipe") }
                return unlink(dirFd: dirFd, name: name, path: path, st: now)
            }
            if code != ENOENT { skip(path, "cannot be opened to overwrite: \(Self.reason(code)); left in place") }
            return
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_dev == expected.st_dev else {
            close(fd)
            return skip(path, "changed during the wipe; left in place")
        }
        if st.st_nlink != 1 || st.st_size == 0 {
            // Linked elsewhere since readdir (its data belongs to that name too), or
            // nothing to overwrite.
            close(fd)
            return unlink(dirFd: dirFd, name: name, path: path, st: st)
        }
        var written: Int64 = 0
        for pass in 0..<options.passes {
            switch writeData(fd, size: Int64(st.st_size)) {
            case .success(let bytes): written += bytes
            case .failure(let error):
                close(fd)
                return skip(path, error.code == ECANCELED ? Self.cancelledReason : "could not be overwritten (\(Self.reason(error.code))); left in place")
            }
            // Every pass but the last must reach the disk, or the page cache simply keeps
            // the last one; the last is made durable with its batch.
            if pass < options.passes - 1, fdatasync(fd) != 0 {
                let code = errno
                close(fd)
                return skip(path, "overwrite pass could not be made durable (\(Self.reason(code))); left in place")
            }
        }
        close(fd)
        if batchDirs.count >= engine.batchDirectories, !batchDirsHold(dirFd) { flush() }
        let dup = batchDirectory(dirFd)
        batch.append(Pending(dirFd: dup, name: name, path: path, dev: UInt64(st.st_dev), ino: UInt64(st.st_ino), bytes: written))
        batchBytes += written
        if batch.count >= engine.batchFiles || batchBytes >= engine.batchBytes { flush() }
    }

    struct WriteError: Error { var code: Int32 }

    /// Writes the pattern over every data range of the file (`SEEK_DATA`/`SEEK_HOLE`), so a
    /// sparse file is not inflated. The file keeps its size: the last block goes to disk
    /// whole from its page (the part past the end zeroed), so rounding up would only add
    /// a size change to journal. Large chunks, positioned writes: no per-block calls.
    func writeData(_ fd: Int32, size: Int64) -> Result<Int64, WriteError> {
        var offset: Int64 = 0
        var written: Int64 = 0
        while offset < size {
            var data = lseek(fd, off_t(offset), SEEK_DATA)
            var hole: off_t
            if data < 0 {
                if errno == ENXIO { break }  // only a hole is left
                data = off_t(offset)
                hole = off_t(size)
            } else {
                hole = lseek(fd, data, SEEK_HOLE)
                if hole < 0 { hole = off_t(size) }
            }
            let to = min(Int64(hole), size)
            var position = Int64(data)
            while position < to {
                if progress.isCancelled { return .failure(WriteError(code: ECANCELED)) }
                let length = Int(min(Int64(source.chunkSize), to - position))
                let n = source.withNext(length) { chunk in pwrite(fd, chunk.baseAddress, chunk.count, off_t(position)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    return .failure(WriteError(code: errno))
                }
                position += Int64(n)
                written += Int64(n)
                progress.update { $0.bytesWritten += Int64(n) }
            }
            offset = max(Int64(hole), offset + 1)
        }
        return .success(written)
    }

    private func batchDirsHold(_ dirFd: Int32) -> Bool {
        var st = stat()
        fstat(dirFd, &st)
        return batchDirs.last.map { $0.dev == UInt64(st.st_dev) && $0.ino == UInt64(st.st_ino) } ?? false
    }

    /// A duplicate of `dirFd` that stays valid while the walk closes directories.
    private func batchDirectory(_ dirFd: Int32) -> Int32 {
        var st = stat()
        fstat(dirFd, &st)
        if let last = batchDirs.last, last.dev == UInt64(st.st_dev), last.ino == UInt64(st.st_ino) { return last.fd }
        let fd = dup(dirFd)
        batchDirs.append((UInt64(st.st_dev), UInt64(st.st_ino), fd))
        return fd
    }

    /// Closes the batch's descriptors without unlinking anything.
    private func discardBatch() {
        for d in batchDirs { close(d.fd) }
        batch.removeAll()
        batchDirs.removeAll()
        batchBytes = 0
    }

    /// Makes the batch durable with one `syncfs`, then truncates and unlinks its files.
    /// A batch that cannot be made durable is left in place and reported.
    func flush() {
        defer {
            for d in batchDirs { close(d.fd) }
            batchDirs.removeAll()
            batch.removeAll()
            batchBytes = 0
        }
        guard let first = batch.first else { return }
        let synced = lockwipe_syncfs(first.dirFd)
        for file in batch {
            if synced != 0 {
                skip(file.path, "the overwrite could not be made durable (syncfs: \(Self.reason(-synced))); left in place")
                continue
            }
            // The name must still be the file that was overwritten: anything else in its
            // place is left for the next walk, which overwrites it first.
            let fd = openat(file.dirFd, file.name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
            var st = stat()
            guard fd >= 0, fstat(fd, &st) == 0, UInt64(st.st_dev) == file.dev, UInt64(st.st_ino) == file.ino else {
                if fd >= 0 { close(fd) }
                continue
            }
            tally.filesOverwritten += 1
            tally.bytesOverwritten += file.bytes
            progress.update { $0.filesOverwritten += 1 }
            if st.st_nlink == 1 { _ = ftruncate(fd, 0) }  // a new link elsewhere keeps its data
            close(fd)
            if unlinkat(file.dirFd, file.name, 0) == 0 {
                removed()
            } else if errno != ENOENT {
                skip(file.path, "overwritten, but cannot be unlinked: \(Self.reason(errno))")
            }
        }
    }

    // MARK: Census

    /// Counts the files and bytes the overwrite will write, for the progress ETA. A plain
    /// walk that never modifies anything; it does not go deeper than the descriptor
    /// budget (a deep chain holds little data), so the totals are an estimate.
    func census(_ vault: VaultDirectory, files: inout Int, bytes: inout Int64) {
        guard let opened = try? VaultPath.open(vault) else { return }
        close(opened.parent)
        let rootFd = opened.fd
        var rootStat = stat()
        guard fstat(rootFd, &rootStat) == 0, let rootDir = fdopendir(rootFd) else {
            close(rootFd)
            return
        }
        var stack: [OpaquePointer] = [rootDir]
        defer { for dir in stack { closedir(dir) } }
        while let dir = stack.last {
            guard let entry = readdir(dir) else {
                closedir(stack.removeLast())
                continue
            }
            let name = Self.name(of: entry)
            if name == [46, 0] || name == [46, 46, 0] { continue }
            var st = stat()
            guard fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) == 0, st.st_dev == rootStat.st_dev else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFREG where st.st_nlink == 1:
                files += 1
                bytes += min(Int64(st.st_size), Int64(st.st_blocks) * 512)
            case S_IFDIR where stack.count < engine.maxOpenDirectories:
                let fd = openat(dirfd(dir), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                if fd >= 0, let child = fdopendir(fd) { stack.append(child) } else if fd >= 0 { close(fd) }
            default:
                break
            }
        }
    }
}

/// `d_type` values (dirent.h), which Glibc does not import as Swift constants.
enum DirectoryType {
    static let unknown: UInt8 = 0
    static let directory: UInt8 = 4
    static let regular: UInt8 = 8
}
