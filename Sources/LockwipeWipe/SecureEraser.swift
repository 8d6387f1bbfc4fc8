import Foundation
import LockwipeCore
import LockwipeVaultIO

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
/// - the pattern is written through the descriptor the walk opened and checked, by writer
///   threads (`OverwriteWriters`), with `O_DIRECT` where the file system takes it;
/// - overwritten data is made durable (per batch: each file's writes waited for and one
///   device cache flush where the file system overwrites in place, an `fdatasync` per
///   file elsewhere; `WipeRun.finalize`, on a second thread beside the walk) *before*
///   the file is truncated and unlinked: dirty pages of an unlinked file may never reach
///   the disk, and a crash after the unlink would leave the old data with no name left
///   to resume from; a directory is removed after the files in it that were waiting;
/// - on ext4, an overwrite wipe leaves no name of what it removed on the device: emptied
///   directories are renamed and written out (a journal checkpoint) before they are
///   removed, and the journal is zeroed at the end (`WipeRun+Names.swift`); elsewhere,
///   or when that fails, the names are a caveat;
/// - depth and size are limited by neither the stack nor descriptors nor memory: the walk
///   is iterative, keeps at most `maxOpenDirectories` directories open, and holds one name
///   per level of the chain it is in (`WalkPath`), never a path per level; a path is
///   spelled out only to report an entry, shortened past `PATH_MAX`.
public struct SecureEraser: VaultErasing {
    /// Directory descriptors kept open at most; deeper walks re-open parents through `..`.
    public var maxOpenDirectories: Int
    /// Overwritten files waiting to be made durable together, at most; each holds its
    /// descriptor until then. Fewer when the descriptor limit would not hold two batches
    /// (`WipeRun.batchFiles`): under systemd's default soft limit of 1024 about 440; the
    /// unit sets `LimitNOFILE=8192`. One flush per 1,024 small files rather than per 128:
    /// with `O_DIRECT` writers the flushes, not the walk, had become the limit
    /// (docs/benchmarks.md).
    public var batchFiles: Int
    /// Overwritten bytes waiting to be made durable together, at most.
    public var batchBytes: Int64
    /// Directories the batch's files are in, at most (each holds one descriptor).
    public var batchDirectories: Int
    /// Threads that write the pattern, several files in flight (`OverwriteWriters`).
    public var writers: Int

    public init(
        maxOpenDirectories: Int = 32, batchFiles: Int = 1024, batchBytes: Int64 = 256 << 20, batchDirectories: Int = 32, writers: Int = 8
    ) {
        self.maxOpenDirectories = max(2, maxOpenDirectories)
        self.batchFiles = max(1, batchFiles)
        self.batchBytes = max(1, batchBytes)
        self.batchDirectories = max(1, batchDirectories)
        self.writers = max(1, writers)
    }

    public func erase(directories: [VaultDirectory], options: WipeOptions, progress: WipeProgress) async -> WipeSummary {
        let started = ContinuousClock.now
        let engine = self
        let result = try? await runOnWipeThread { () -> (WipeRun.Tally, [VaultSurvey]) in
            let run = WipeRun(engine: engine, options: options, progress: progress)
            // The survey first: media and caveats for the report, and (when overwriting)
            // the census for the progress totals.
            let overwrite = options.passes > 0
            let surveys = directories.map {
                VaultSurvey.take($0, count: overwrite, overwrite: overwrite, maxOpenDirectories: engine.maxOpenDirectories)
            }
            if overwrite {
                let files = surveys.reduce(0) { $0 + $1.census.files }
                let bytes = surveys.reduce(Int64(0)) { $0 + $1.census.bytes }
                progress.setTotals(files: files, bytes: bytes * Int64(options.passes))
            }
            progress.startErasing()
            for directory in directories { run.erase(root: directory) }
            run.zeroJournals()
            run.finish()
            return (run.tally, surveys)
        }
        let tally =
            result?.0 ?? WipeRun.Tally(skipped: [.init(path: directories.map(\.path).joined(separator: ", "), reason: "the wipe thread could not run")])
        var summary = WipeSummary(
            filesOverwritten: tally.filesOverwritten, bytesOverwritten: tally.bytesOverwritten,
            entriesRemoved: tally.removed, skipped: tally.skipped,
            elapsedSeconds: WipeProgress.seconds(ContinuousClock.now - started),
            passes: options.passes, pattern: options.pattern.rawValue, attributesCleared: tally.attributesCleared)
        summary.media = result?.1.compactMap(\.media) ?? []
        summary.caveats = (result?.1.flatMap(\.caveats) ?? []) + tally.namesLeft.map { WipeCaveats.namesNotCleared(path: $0.path, reason: $0.reason) }
        return summary
    }
}
