import CLockwipeFS
import Foundation

/// The batch: files handed to the writers, waiting to be made durable before they may be
/// truncated and unlinked, and directories the walk finished while files of theirs were
/// waiting. Whoever takes a batch over waits for the writers to be done with its files
/// before anything else (`finalize`, `discardBatch`), so no descriptor is closed under a
/// writer, and the walk goes on meanwhile.
///
/// A full batch goes to a second thread (`BatchWorker`) while the walk overwrites the
/// next one: freeing a file's blocks is the slow part of an unlink (with online
/// `discard` each one waits for the device), and on one thread the disk sat idle while
/// it ran. At most one batch is in flight; it is accounted (tally, progress, skipped)
/// on the wipe's own thread before the next one is handed over, and before the walk's
/// end is checked (`settle`). The order of the guarantees is the batch's own: no file is
/// truncated or unlinked before its overwrite is durable, and a directory is removed
/// only after the files and directories in it that were waiting.
extension WipeRun {
    /// A directory the walk finished while files in it were still waiting.
    struct PendingDirectory: Sendable {
        /// A duplicate of its parent's descriptor (`batchDirectory`).
        var parentFd: Int32
        var name: [CChar]
        var path: EntryPath
        /// The filler name it was renamed to before its removal (`WipeRun+Names.swift`).
        var filler: [CChar]? = nil
    }

    /// One batch as the worker takes it over, descriptors included (it closes them).
    struct Batch: Sendable {
        var files: [Pending]
        var directories: [PendingDirectory]
        var directoryFds: [Int32]
        /// The writers' jobs for `files` (consecutive ids), to wait for before anything
        /// else is done with them.
        var writes: Range<Int>
        var writers: OverwriteWriters?
        /// Its directories are renamed and written out before their removal (`prepareRemovals`).
        var clearNames = false

        /// What the writers made of each file, once they are done with all of them.
        func written() -> [Int: OverwriteWriters.Outcome] {
            writers?.wait(for: writes) ?? [:]
        }

        var isEmpty: Bool { files.isEmpty && directories.isEmpty }

        func closeDescriptors() {
            for file in files { close(file.fd) }
            for fd in directoryFds { close(fd) }
        }
    }

    /// What became of a batch's entry, accounted on the wipe's thread.
    enum Outcome: Sendable {
        /// The pattern could not be written (or a pass made durable); left in place.
        case notWritten(path: EntryPath, error: PatternWriter.WriteError)
        case notDurable(path: EntryPath, code: Int32)
        /// Overwritten and durable; `unlink` is 0, or the errno of the failed unlink.
        case overwritten(path: EntryPath, bytes: Int64, unlink: Int32)
        /// 0, or the errno of the failed `rmdir`.
        case directory(path: EntryPath, code: Int32)
        /// The journal could not be checkpointed before directories were removed (errno).
        case namesNotCleared(code: Int32)
    }

    /// File systems that overwrite a file's allocated blocks in place (statfs magic:
    /// ext2/3/4, xfs): there the data reaching the device is all an overwrite needs.
    static let inPlaceFileSystems: Set<UInt32> = [0xEF53, 0x5846_5342]

    /// The batch as it stands, leaving an empty one behind.
    private func takeBatch() -> Batch {
        defer {
            batch.removeAll()
            batchRemovals.removeAll()
            batchDirs.removeAll()
            batchBytes = 0
        }
        let writes = (batch.first?.id ?? 0)..<((batch.last?.id ?? -1) + 1)
        return Batch(
            files: batch, directories: batchRemovals, directoryFds: batchDirs.map(\.fd), writes: writes,
            writers: writes.isEmpty ? nil : writers, clearNames: clearingNames)
    }

    /// Hands the batch to the worker, once the one before it is finished and accounted.
    func flush() {
        settleInFlight()
        let job = takeBatch()
        if job.isEmpty { return job.closeDescriptors() }
        let box = OutcomeBox()
        inFlight = box
        worker.submit { box.outcomes = WipeRun.finalize(job) }
    }

    /// Flushes the batch and waits until it is finished and accounted.
    func settle() {
        flush()
        settleInFlight()
    }

    /// Waits for the batch in flight, if any, and accounts for it.
    func settleInFlight() {
        guard let box = inFlight else { return }
        worker.wait()
        inFlight = nil
        for outcome in box.outcomes { account(outcome) }
    }

    /// Enters one outcome in the tally, the progress and the skipped entries.
    private func account(_ outcome: Outcome) {
        switch outcome {
        case .notWritten(let path, let error):
            if error.code == ECANCELED {
                skip(path, Self.cancelledReason)
            } else if error.passNotDurable {
                skip(path, "overwrite pass could not be made durable (\(Self.reason(error.code))); left in place")
            } else {
                skip(path, "could not be overwritten (\(Self.reason(error.code))); left in place")
            }
        case .notDurable(let path, let code):
            skip(path, "the overwrite could not be made durable (\(Self.reason(code))); left in place")
        case .overwritten(let path, let bytes, let unlink):
            tally.filesOverwritten += 1
            tally.bytesOverwritten += bytes
            if unlink == 0 {
                removed()
            } else if unlink != ENOENT {
                skip(path, "overwritten, but cannot be unlinked: \(Self.reason(unlink))")
            }
        case .directory(let path, let code):
            if code == 0 {
                removed()
            } else if code != ENOENT && code != ENOTEMPTY {
                // ENOTEMPTY: something inside was skipped, and that entry says why.
                skip(path, Self.reason(code))
            }
        case .namesNotCleared(let code):
            namesNotCleared("emptied directories could not be written out before their removal (\(Self.reason(code)))")
        }
    }

    /// Removes a directory the walk finished: at once when nothing is waiting, else after
    /// the batch (files of it may be in the batch or in flight).
    func removeDirectory(parentFd: Int32, name: [CChar], path: EntryPath) {
        // Clearing names, every removal waits for its batch's checkpoint (`prepareRemovals`).
        if !clearingNames && batch.isEmpty && batchRemovals.isEmpty && inFlight == nil {
            return account(Self.removeDirectory(PendingDirectory(parentFd: parentFd, name: name, path: path)))
        }
        batchRemovals.append(PendingDirectory(parentFd: batchDirectory(parentFd), name: name, path: path))
    }

    private static func removeDirectory(_ directory: PendingDirectory) -> Outcome {
        guard let filler = directory.filler else {
            return .directory(path: directory.path, code: unlinkat(directory.parentFd, directory.name, AT_REMOVEDIR) == 0 ? 0 : errno)
        }
        if unlinkat(directory.parentFd, filler, AT_REMOVEDIR) == 0 { return .directory(path: directory.path, code: 0) }
        let code = errno
        // Not removed (something inside was skipped, and says so by its path): its name back.
        _ = lockwipe_rename_noreplace(directory.parentFd, filler, directory.parentFd, directory.name)
        return .directory(path: directory.path, code: code)
    }

    /// Closes the batch's descriptors without unlinking anything (the batch in flight,
    /// already durable, is finished first).
    func discardBatch() {
        settleInFlight()
        let job = takeBatch()
        _ = job.written()  // the writers stop at the cancellation; then the descriptors are free
        job.closeDescriptors()
    }

    /// A duplicate of `dirFd` for the batch, valid while the walk closes directories: the
    /// batch's last one when it is the same directory, else a new one (the batch is handed
    /// over first when it holds `batchDirectories` already).
    func batchDirectory(_ dirFd: Int32) -> Int32 {
        var st = stat()
        fstat(dirFd, &st)
        if let last = batchDirs.last, last.dev == UInt64(st.st_dev), last.ino == UInt64(st.st_ino) { return last.fd }
        if batchDirs.count >= engine.batchDirectories { flush() }
        let fd = dup(dirFd)
        batchDirs.append((UInt64(st.st_dev), UInt64(st.st_ino), fd))
        return fd
    }

    /// Waits for the writers to be done with the batch's files, makes the overwrites
    /// durable, then truncates and unlinks its files, then removes its directories;
    /// closes its descriptors. Runs on the worker: touches nothing but the batch. A file
    /// whose overwrite failed or cannot be made durable is left in place and reported.
    ///
    /// Durable, without waiting for anyone else's writes (as `syncfs` did): on a file
    /// system that overwrites in place, each file's writes are waited for
    /// (`sync_file_range` WAIT_BEFORE|WRITE|WAIT_AFTER) and one `fdatasync` then flushes
    /// the device's volatile cache, which holds every write completed before it;
    /// elsewhere (copy-on-write file systems write new extents, whose metadata must be
    /// committed too) each file gets its own `fdatasync`.
    static func finalize(_ batch: Batch) -> [Outcome] {
        defer { batch.closeDescriptors() }
        var outcomes: [Outcome] = []
        // Only what was written goes on; the rest is left in place and reported.
        let written = batch.written()
        var files: [Pending] = []
        files.reserveCapacity(batch.files.count)
        for var file in batch.files {
            switch written[file.id] ?? .failure(.init(code: EIO)) {
            case .success(let bytes):
                file.bytes = bytes
                files.append(file)
            case .failure(let error):
                outcomes.append(.notWritten(path: file.path, error: error))
            }
        }
        var failure = [Int32](repeating: 0, count: files.count)
        if let first = files.first {
            var magic: UInt32 = 0
            if lockwipe_fs_magic(first.fd, &magic) == 0 && inPlaceFileSystems.contains(magic) {
                for (i, file) in files.enumerated() { failure[i] = lockwipe_wait_written(file.fd) }
                // One cache flush for the batch: every file of it is on this file system.
                if let last = files.indices.last(where: { failure[$0] == 0 }), fdatasync(files[last].fd) != 0 {
                    let code = errno
                    for i in files.indices where failure[i] == 0 { failure[i] = -code }
                }
            } else {
                for (i, file) in files.enumerated() { failure[i] = fdatasync(file.fd) == 0 ? 0 : -errno }
            }
        }
        for (i, file) in files.enumerated() {
            if failure[i] != 0 {
                outcomes.append(.notDurable(path: file.path, code: -failure[i]))
                continue
            }
            // The name must still be the file that was overwritten: anything else in its
            // place is left for the next walk, which overwrites it first.
            var st = stat()
            guard fstatat(file.dirFd, file.name, &st, AT_SYMLINK_NOFOLLOW) == 0, UInt64(st.st_dev) == file.dev, UInt64(st.st_ino) == file.ino
            else { continue }
            var held = stat()
            if fstat(file.fd, &held) == 0, held.st_nlink == 1 { _ = ftruncate(file.fd, 0) }  // a new link elsewhere keeps its data
            let unlink = unlinkat(file.dirFd, file.name, 0) == 0 ? 0 : errno
            outcomes.append(.overwritten(path: file.path, bytes: file.bytes, unlink: unlink))
        }
        guard batch.clearNames else {
            outcomes += batch.directories.map(removeDirectory)
            return outcomes
        }
        let (directories, notCleared) = prepareRemovals(batch.directories)
        if let notCleared { outcomes.append(notCleared) }
        outcomes += directories.map(removeDirectory)
        return outcomes
    }
}
