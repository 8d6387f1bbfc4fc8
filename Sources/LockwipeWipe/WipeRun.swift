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
    /// The vault's root as the walk first opened it: what its removal checks it still is.
    var rootIdentity: (dev: UInt64, ino: UInt64)?

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
}

/// `d_type` values (dirent.h), which Glibc does not import as Swift constants.
enum DirectoryType {
    static let unknown: UInt8 = 0
    static let directory: UInt8 = 4
    static let regular: UInt8 = 8
}
