import CLockwipeFS
import Foundation
import LockwipeCore
import LockwipeVaultIO

/// One wipe: the walk and the tally on the wipe's thread, the writes on writer threads
/// (`OverwriteWriters`), each full batch finished beside them on one more
/// (`WipeRun+Batch.swift`).
final class WipeRun {
    struct Tally: Sendable {
        var removed = 0
        var filesOverwritten = 0
        var bytesOverwritten: Int64 = 0
        var attributesCleared = 0
        var skipped: [WipeSummary.Skipped] = []
        /// Vaults whose names the wipe could not clear, and why (`WipeRun+Names.swift`).
        var namesLeft: [WipeSummary.Skipped] = []
    }

    private struct Frame {
        var dir: OpaquePointer?
        var fd: Int32
        var dev: UInt64
        var ino: UInt64
        /// Its name and, shared, its parent's: a frame holds one name, never a path
        /// (`WalkPath`); its `name` is the one to remove it by from its parent.
        var path: WalkPath
        /// Subdirectories already walked that were not removed at once (something inside
        /// was skipped, or their removal waits for the batch): not entered again when this
        /// directory is re-opened through `..` and read from its start. Without it, every
        /// level of a deep chain re-opened on the way up walked the whole chain below it
        /// again, when anything at the bottom stayed.
        var walked: Set<DirectoryID> = []
    }

    struct DirectoryID: Hashable {
        var dev: UInt64
        var ino: UInt64
    }

    /// An overwritten file waiting for its batch to be made durable before it may be
    /// truncated and unlinked. Its descriptor stays open until then (`fd`).
    struct Pending {
        /// The writers' job id (`OverwriteWriters.Job.id`).
        var id: Int
        var fd: Int32
        var dirFd: Int32
        var name: [CChar]
        /// The directory it is in: its path is spelled out only if it is reported.
        var directory: WalkPath
        var dev: UInt64
        var ino: UInt64
        var bytes: Int64

        var path: EntryPath { EntryPath(directory: directory, name: name) }
    }

    private enum WalkEnd { case finished, lostWay, cancelled }

    static let cancelledReason = "stopped because the daemon is shutting down; the wipe resumes at the next start"

    let engine: SecureEraser
    let options: WipeOptions
    let progress: WipeProgress
    var tally = Tally()
    private var reported: Set<String> = []
    var batch: [Pending] = []
    var batchBytes: Int64 = 0
    /// Directories the walk finished while files of theirs were waiting: removed after them.
    var batchRemovals: [PendingDirectory] = []
    /// Duplicated directory descriptors the batch unlinks through, closed with the batch.
    var batchDirs: [(dev: UInt64, ino: UInt64, fd: Int32)] = []
    /// The batch the worker is finishing, not yet accounted.
    var inFlight: OutcomeBox?
    /// The names of what this vault's wipe removes are cleared (`WipeRun+Names.swift`).
    var clearingNames = false
    var namesVault = ""
    /// One descriptor per ext4 file system whose journal is zeroed at the end, with its vaults.
    var journals: [(dev: UInt64, fd: Int32, vaults: [String])] = []
    private var workerThread: BatchWorker?
    private var writerThreads: OverwriteWriters?
    /// The id the next file handed to the writers gets (consecutive over the wipe).
    var nextWriteID = 0
    /// Started with the first file to overwrite, like the worker.
    var writers: OverwriteWriters {
        if let writers = writerThreads { return writers }
        let writers = OverwriteWriters(count: engine.writers, pattern: options.pattern, passes: options.passes, progress: progress)
        writerThreads = writers
        return writers
    }
    /// Started with the first batch: a wipe that overwrites nothing starts no thread.
    var worker: BatchWorker {
        if let worker = workerThread { return worker }
        let worker = BatchWorker()
        workerThread = worker
        return worker
    }
    /// Device and inode of the vault root as the walk opened it: `remove_root` removes
    /// that directory and no other.
    private var rootIdentity: (dev: UInt64, ino: UInt64)?

    /// Files per batch: `engine.batchFiles`, fewer when the descriptor limit would not
    /// hold two batches (one in flight, one filling) beside the walk's directories.
    let batchFileLimit: Int

    init(engine: SecureEraser, options: WipeOptions, progress: WipeProgress) {
        self.engine = engine
        self.options = options
        self.progress = progress
        var limit = rlimit()
        let soft = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 && limit.rlim_cur < 1 << 20 ? Int(limit.rlim_cur) : 1 << 20
        batchFileLimit = Self.batchFiles(engine: engine, descriptorLimit: soft, inUse: Self.openDescriptors() ?? 64)
    }

    /// Descriptors left for the rest of the daemon to open while a wipe runs (new
    /// connections, the survey after it), beyond those open when it starts.
    static let spareDescriptors = 16

    /// How many files a batch may hold under `descriptorLimit` with `inUse` open already:
    /// two batches (one in flight, one filling), each with its directories, beside the
    /// walk's open directories and a spare. At least one.
    static func batchFiles(engine: SecureEraser, descriptorLimit: Int, inUse: Int) -> Int {
        let free = descriptorLimit - inUse - spareDescriptors - engine.maxOpenDirectories - 2 * engine.batchDirectories
        return max(1, min(engine.batchFiles, free / 2))
    }

    /// The process's open descriptors now (`/proc/self/fd`), or nil when unreadable.
    static func openDescriptors() -> Int? {
        guard let dir = opendir("/proc/self/fd") else { return nil }
        defer { closedir(dir) }
        var count = -3  // ".", ".." and the directory's own descriptor
        while readdir(dir) != nil { count += 1 }
        return max(0, count)
    }

    /// Waits for the last batch and ends the worker's and the writers' threads; the tally
    /// is final after it.
    func finish() {
        settleInFlight()
        workerThread?.stop()
        workerThread = nil
        writerThreads?.stop()
        writerThreads = nil
    }

    // MARK: Reporting

    func skip(_ path: String, _ reason: String) {
        guard reported.insert(path).inserted else { return }
        tally.skipped.append(.init(path: path, reason: reason))
        progress.entrySkipped()
    }

    func skip(_ path: EntryPath, _ reason: String) { skip(path.description, reason) }

    func removed() {
        tally.removed += 1
        progress.entryRemoved()
    }

    static func reason(_ code: Int32) -> String {
        switch code {
        case EPERM: return "operation not permitted"
        case EBUSY: return "busy (in use as a mount point?)"
        case ETXTBSY: return "busy (a running program)"
        default: return String(cString: strerror(code))
        }
    }

    /// The entry's name with its NUL, read in place (`DirectoryEntry.name(of:)`).
    static func name(of entry: UnsafeMutablePointer<dirent>) -> [CChar] { DirectoryEntry.name(of: entry) }

    // MARK: The vault

    /// Empties (or removes, per `remove_root`) one vault. Entries that appear while the
    /// walk runs, or a walk that lost its way back up, lead to another walk (at most 3).
    func erase(root vault: VaultDirectory) {
        let root = vault.path
        startClearingNames(vault)
        for attempt in 1...3 {
            let skippedBefore = tally.skipped.count
            let end = progress.isCancelled ? .cancelled : walk(vault)
            if end == .cancelled {
                discardBatch()  // not durable yet: those files stay, and are overwritten again on resume
                return skip(root, Self.cancelledReason)
            }
            settle()
            guard let left = remainingEntries(vault) else { return }  // could not be opened: reported
            if left == 0 {
                if options.removeRoot {
                    writeOutDirectories()  // its blocks, names wiped, reach the disk before rmdir frees them
                    removeRoot(vault)
                }
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
        if unlinkat(parentFd, name, AT_REMOVEDIR) == 0 {
            removed()
        } else if errno != ENOENT {
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

        var stack = [Frame(dir: rootDir, fd: rootFd, dev: UInt64(rootStat.st_dev), ino: UInt64(rootStat.st_ino), path: WalkPath(root: root))]
        var openCount = 1
        defer {
            for frame in stack { if let dir = frame.dir { closedir(dir) } }
        }

        while let top = stack.indices.last {
            if progress.isCancelled { return .cancelled }
            errno = 0
            guard let entry = readdir(stack[top].dir!) else {
                if errno != 0 { skip(stack[top].path.text(), "cannot be read: \(Self.reason(errno))") }
                let child = stack.removeLast()
                guard let parent = stack.indices.last else {
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
                closedir(child.dir!)
                openCount -= 1
                // After its files in the batch, if any; ENOTEMPTY: something inside was
                // skipped, and that entry says why.
                let removedBefore = tally.removed
                removeDirectory(parentFd: stack[parent].fd, name: child.path.name, path: EntryPath(directory: child.path))
                if tally.removed == removedBefore { stack[parent].walked.insert(DirectoryID(dev: child.dev, ino: child.ino)) }
                continue
            }
            let name = Self.name(of: entry)
            if name == [46, 0] || name == [46, 46, 0] { continue }  // "." and ".."
            let type = entry.pointee.d_type
            let dirFd = stack[top].fd
            let path = EntryPath(directory: stack[top].path, name: name)

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
            if !stack[top].walked.isEmpty, stack[top].walked.contains(DirectoryID(dev: UInt64(st.st_dev), ino: UInt64(st.st_ino))) {
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
            let childPath = WalkPath(name, in: stack[top].path)
            clearAttributes(childFd, childPath.text())
            stack.append(Frame(dir: childDir, fd: childFd, dev: UInt64(opened.st_dev), ino: UInt64(opened.st_ino), path: childPath))
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
    private func removeEntry(dirFd: Int32, name: [CChar], path: EntryPath, st: stat) {
        if (st.st_mode & S_IFMT) == S_IFREG && st.st_nlink == 1 && options.passes > 0 {
            overwrite(dirFd: dirFd, name: name, path: path, expected: st)
            return
        }
        unlink(dirFd: dirFd, name: name, path: path, st: st)
    }

    func unlink(dirFd: Int32, name: [CChar], path: EntryPath, st: stat) {
        if unlinkat(dirFd, name, 0) == 0 { return removed() }
        var code = errno
        if code == EPERM, clearEntryAttributes(dirFd: dirFd, name: name, path: path, st: st) {
            if unlinkat(dirFd, name, 0) == 0 { return removed() }
            code = errno
        }
        if code != ENOENT { skip(path, Self.reason(code)) }
    }
}

/// `d_type` values (dirent.h), which Glibc does not import as Swift constants.
enum DirectoryType {
    static let unknown: UInt8 = 0
    static let directory: UInt8 = 4
    static let regular: UInt8 = 8
}
