import CLockwipeFS
import Foundation
import LockwipeCore
import LockwipeVaultIO

/// Names as well as contents (issue 26): an overwrite wipe on ext4 leaves no name of what
/// it removed on the device. Measured with raw scans of a loop-mounted image
/// (docs/benchmarks.md, "Names"), names survived in two places, and nowhere else:
/// - blocks of removed directories: ext4 wipes a removed entry's name in its directory
///   block (Linux 5.14), but a directory's blocks reach their place on the disk only
///   when the journal is checkpointed, and blocks freed before that are never written
///   again: they keep the names the last checkpoint wrote. So before a batch removes
///   directories, each is renamed to a short filler name (its own name is wiped from its
///   parent's block by the rename) and the journal is checkpointed once
///   (`EXT4_IOC_CHECKPOINT`): every emptied directory then reaches the disk with no name
///   in it but fillers, and only then is removed;
/// - the journal, which holds copies of every directory block as it changed: at the end
///   of the wipe it is checkpointed once more and overwritten with zeros
///   (`EXT4_IOC_CHECKPOINT_FLAG_ZEROOUT`), once per file system.
/// Without a journal (ext2, or ext4 made without one) the checkpoint fails with ENODEV,
/// and the emptied directories' blocks are written by one `syncfs` per batch instead,
/// the vault root's by `fsync` on it at the end. Renaming files before unlinking them, as `shred -u` does, adds nothing on ext4:
/// the unlink wipes the name in place. Only an overwrite wipe (`passes > 0`) does this; other
/// file systems keep names, which is a caveat (`WipeCaveats.leftNames`), and so is a
/// step that fails here (`WipeCaveats.namesNotCleared`).
extension WipeRun {
    static let ext4Magic: UInt32 = 0xEF53

    /// The kernel's release (`uname -r`).
    static let kernelRelease: String = {
        var u = utsname()
        guard uname(&u) == 0 else { return "" }
        return withUnsafeBytes(of: u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }()

    /// Decides whether this vault's names are cleared, and keeps a descriptor of its file
    /// system for the journal's zeroing at the end. A vault that cannot be opened is left
    /// to the walk, which reports it.
    func startClearingNames(_ vault: VaultDirectory) {
        clearingNames = false
        namesVault = vault.path
        guard options.passes > 0, let opened = try? VaultPath.open(vault) else { return }
        close(opened.parent)
        var magic: UInt32 = 0
        var st = stat()
        guard lockwipe_fs_magic(opened.fd, &magic) == 0, magic == Self.ext4Magic, fstat(opened.fd, &st) == 0 else {
            close(opened.fd)
            return
        }
        guard WipeCaveats.ext4WipesNames(kernelRelease: Self.kernelRelease) else {
            close(opened.fd)
            return namesNotCleared("Linux \(Self.kernelRelease) does not wipe the name of a removed entry in its directory block (5.14 and later do)")
        }
        clearingNames = true
        if let i = journals.firstIndex(where: { $0.dev == UInt64(st.st_dev) }) {
            journals[i].vaults.append(vault.path)
            close(opened.fd)
        } else {
            journals.append((UInt64(st.st_dev), opened.fd, [vault.path]))
        }
    }

    /// Notes that the current vault's names may remain, and why (first reason only).
    func namesNotCleared(_ reason: String, vault: String? = nil) {
        let path = vault ?? namesVault
        if tally.namesLeft.contains(where: { $0.path == path }) { return }
        tally.namesLeft.append(.init(path: path, reason: reason))
    }

    /// Before the vault root itself is removed: its blocks reach the disk first.
    func writeOutDirectories() {
        guard clearingNames, let journal = journals.first(where: { $0.vaults.contains(namesVault) }) else { return }
        var rc = lockwipe_ext4_checkpoint(journal.fd, 0)
        if rc == -ENODEV { rc = fsync(journal.fd) == 0 ? 0 : -errno }  // no journal: the root's own blocks
        if rc != 0 { namesNotCleared("the emptied vault could not be written out before its removal (\(Self.reason(-rc)))") }
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
            // No journal to zero: the vault root's blocks (this descriptor's) are written out.
            if rc == -ENODEV { rc = fsync(journal.fd) == 0 ? 0 : -errno }
            if rc == 0 { continue }
            for vault in journal.vaults {
                namesNotCleared("the journal could not be overwritten (\(Self.reason(-rc)))", vault: vault)
            }
        }
    }

    /// Renames each directory (children before parents, as the walk finished them) to a
    /// filler name no entry has (`RENAME_NOREPLACE`: nothing is ever replaced), then
    /// checkpoints the journal once (without one, `syncfs`). Runs on the worker, through
    /// the batch's directory descriptors only. A directory that cannot be renamed is removed by its own name.
    /// Returns the directories to remove and, if the checkpoint failed, its outcome.
    static func prepareRemovals(_ directories: [PendingDirectory]) -> ([PendingDirectory], Outcome?) {
        guard let first = directories.first else { return ([], nil) }
        var renamed = directories
        var counter = 0
        for i in renamed.indices {
            for _ in 0..<64 {
                let filler = Array(String(counter).utf8CString)
                counter += 1
                let rc = lockwipe_rename_noreplace(renamed[i].parentFd, renamed[i].name, renamed[i].parentFd, filler)
                if rc == 0 { renamed[i].filler = filler }
                if rc != -EEXIST { break }
            }
        }
        var rc = lockwipe_ext4_checkpoint(first.parentFd, 0)
        // No journal: one `syncfs` writes every dirty directory block (an `fsync` of each
        // directory, with a cache flush each, was slower for nested directories).
        if rc == -ENODEV { rc = syncfs(first.parentFd) == 0 ? 0 : -errno }
        return (renamed, rc == 0 ? nil : .namesNotCleared(code: -rc))
    }
}
