import CLockwipeFS
import Foundation
import LockwipeCore

/// Names as well as contents (issue 26): an overwrite wipe on ext4 leaves no name of what
/// it removed on the device. Measured with raw scans of a loop-mounted image
/// (docs/benchmarks.md, "Names"), the names survived in two places:
/// - blocks of removed directories: ext4 wipes a removed entry's name in its directory
///   block (Linux 5.14), but a directory's blocks reach their place on the disk only when
///   the journal is checkpointed (without a journal, when they are written back), and
///   blocks freed before that are never written again: they keep the names they had when
///   last written;
/// - the journal, which holds copies of every directory block as it changed.
/// So on ext4 the wipe of a vault takes a first walk (`renameEmptiedDirectories`) that
/// overwrites and unlinks files as always but does not remove directories: each one it
/// empties is renamed to a filler (digits), which wipes its own name from its parent's
/// block. One checkpoint (`EXT4_IOC_CHECKPOINT`; `syncfs` without a journal) then writes
/// every emptied directory to its place with no name in it but fillers, and the walks
/// that follow remove them as always. At the end, the journal is checkpointed once more
/// and overwritten with zeros (`EXT4_IOC_CHECKPOINT_FLAG_ZEROOUT`), once per file system.
/// One checkpoint per vault: one per batch before its directories' removal cost 15 s
/// more for 10,000 nested directories. Renaming files before unlinking them, as `shred -u`
/// does, adds nothing on ext4: the unlink wipes the name in place.
///
/// Only an overwrite wipe (`passes > 0`) does this. Other file systems keep names, a
/// caveat found before the wipe (`WipeCaveats.leftNames`); a step that fails here is one
/// found after it (`WipeCaveats.namesNotCleared`).
extension WipeRun {
    static let ext4Magic: UInt32 = 0xEF53

    /// The kernel's release (`uname -r`).
    static let kernelRelease: String = {
        var u = utsname()
        guard uname(&u) == 0 else { return "" }
        return withUnsafeBytes(of: u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }()

    /// Decides whether this vault's names are cleared (`clearingNames`), and keeps a
    /// descriptor of its file system for the journal's zeroing at the end. A vault that
    /// cannot be opened is left to the walk, which reports it.
    func startClearingNames(_ vault: VaultDirectory) -> Bool {
        clearingNames = false
        namesVault = vault.path
        guard options.passes > 0, let opened = try? VaultPath.open(vault) else { return false }
        close(opened.parent)
        var magic: UInt32 = 0
        var st = stat()
        guard lockwipe_fs_magic(opened.fd, &magic) == 0, magic == Self.ext4Magic, fstat(opened.fd, &st) == 0 else {
            close(opened.fd)
            return false
        }
        guard WipeCaveats.ext4WipesNames(kernelRelease: Self.kernelRelease) else {
            close(opened.fd)
            namesNotCleared("Linux \(Self.kernelRelease) does not wipe the name of a removed entry in its directory block (5.14 and later do)")
            return false
        }
        clearingNames = true
        if let i = journals.firstIndex(where: { $0.dev == UInt64(st.st_dev) }) {
            journals[i].vaults.append(vault.path)
            close(opened.fd)
        } else {
            journals.append((UInt64(st.st_dev), opened.fd, [vault.path]))
        }
        return true
    }

    /// The first walk: files overwritten and unlinked, emptied directories renamed to
    /// fillers; then all of it written out. False when the wipe was stopped (reported).
    func renameEmptiedDirectories(_ vault: VaultDirectory) -> Bool {
        defer { clearingNames = false }
        if progress.isCancelled || walk(vault) == .cancelled {
            discardBatch()
            skip(vault.path, Self.cancelledReason)
            return false
        }
        settle()
        // What it skipped (or lost its way from) the walks that follow meet again.
        guard let journal = journals.first(where: { $0.vaults.contains(vault.path) }) else { return true }
        var rc = lockwipe_ext4_checkpoint(journal.fd, 0)
        if rc == -ENODEV { rc = syncfs(journal.fd) == 0 ? 0 : -errno }  // no journal
        if rc != 0 { namesNotCleared("the emptied directories could not be written out before their removal (\(Self.reason(-rc)))") }
        return true
    }

    /// Notes that a vault's names may remain, and why (first reason only).
    func namesNotCleared(_ reason: String, vault: String? = nil) {
        let path = vault ?? namesVault
        if tally.namesLeft.contains(where: { $0.path == path }) { return }
        tally.namesLeft.append(.init(path: path, reason: reason))
    }

    /// Zeroes the journal of every ext4 file system a vault was wiped on, once each;
    /// closes their descriptors. Skipped when the wipe is stopping: it resumes, and zeroes
    /// them then.
    func zeroJournals() {
        defer {
            for journal in journals { close(journal.fd) }
            journals.removeAll()
        }
        if progress.isCancelled { return }
        for journal in journals {
            var rc = lockwipe_ext4_checkpoint(journal.fd, lockwipe_ext4_checkpoint_zeroout)
            // No journal to zero: the vault root's own blocks (this descriptor's) are written out.
            if rc == -ENODEV { rc = fsync(journal.fd) == 0 ? 0 : -errno }
            if rc == 0 { continue }
            for vault in journal.vaults {
                namesNotCleared("the journal could not be overwritten (\(Self.reason(-rc)))", vault: vault)
            }
        }
    }

    /// A name the first walk gives: digits, and a dash before a retry's number.
    static func isFiller(_ name: [CChar]) -> Bool {
        name.count > 1 && name.dropLast().allSatisfy { ($0 >= 48 && $0 <= 57) || $0 == 45 }
    }

    /// Renames each directory that is empty now (the walk finished it; something skipped
    /// inside keeps it, and its name) to a filler no entry has (`RENAME_NOREPLACE`:
    /// nothing is ever replaced), numbered from `first`. Runs on the worker, after the
    /// batch's unlinks, through the batch's directory descriptors only.
    static func renameEmptied(_ directories: [PendingDirectory], from first: Int) {
        for (i, d) in directories.enumerated() where isEmptyDirectory(parentFd: d.parentFd, name: d.name) {
            for retry in 0..<16 {
                let filler = Array((retry == 0 ? "\(first + i)" : "\(first + i)-\(retry)").utf8CString)
                if lockwipe_rename_noreplace(d.parentFd, d.name, d.parentFd, filler) != -EEXIST { break }
            }
        }
    }

    /// Whether `name` in `parentFd` is a directory with nothing in it (no symlink followed).
    static func isEmptyDirectory(parentFd: Int32, name: [CChar]) -> Bool {
        let fd = openat(parentFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return false }
        guard let dir = fdopendir(fd) else {
            close(fd)
            return false
        }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let n = WipeRun.name(of: entry)
            if n != [46, 0] && n != [46, 46, 0] { return false }
        }
        return true
    }
}
