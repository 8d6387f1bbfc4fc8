import Foundation
import LockwipeCore
import LockwipeVaultIO

/// The certificate's verification of a wipe's erase: each vault is opened again the way
/// the wipe opened it (`VaultPath.open`: no symlink on the way, the recorded device and
/// inode) and walked read-only, counting what is left. Independent of the erase's own
/// tally: it is a second look, after the fact.
package enum WipeVerification {
    /// Entries left under each vault, or what stopped the count. A vault removed by the
    /// wipe (`remove_root`) counts as empty. Blocking: run it on `BlockingPool`.
    package static func remaining(_ vaults: [VaultDirectory], removeRoot: Bool) -> SanitizationCertificate.Verification {
        var left: [String] = []
        var failures: [String] = []
        var total = 0
        for vault in vaults {
            let opened: OpenedVault
            do {
                opened = try VaultPath.open(vault)
            } catch {
                if removeRoot, case .missing(_, let component) = error, component == vault.path { continue }
                failures.append("\(vault.path): \(error)")
                continue
            }
            close(opened.parent)
            let count = countEntries(opened.fd)
            total += count
            if count > 0 { left.append("\(vault.path): \(count) entries left") }
        }
        if !failures.isEmpty {
            return .init(check: "vault-empty", passed: false, detail: "re-walk not possible: " + failures.joined(separator: "; "))
        }
        if total > 0 { return .init(check: "vault-empty", passed: false, detail: "re-walked: " + left.joined(separator: "; ")) }
        return .init(
            check: "vault-empty", passed: true,
            detail: removeRoot ? "re-walked: every vault directory is gone or empty" : "re-walked: every vault directory is empty")
    }

    /// Entries under the directory `fd` (which it closes), without following symlinks or
    /// leaving the file system; at most 32 directories open at once (deeper levels are
    /// counted as one entry each, which still makes a non-empty vault non-empty).
    private static func countEntries(_ fd: Int32) -> Int {
        var rootStat = stat()
        guard fstat(fd, &rootStat) == 0, let root = fdopendir(fd) else {
            close(fd)
            return 0
        }
        var stack: [OpaquePointer] = [root]
        defer { for dir in stack { closedir(dir) } }
        var count = 0
        while let dir = stack.last {
            guard let entry = readdir(dir) else {
                closedir(stack.removeLast())
                continue
            }
            let name = WipeRun.name(of: entry)
            if name == [46, 0] || name == [46, 46, 0] { continue }
            count += 1
            var st = stat()
            guard stack.count < 32, fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) == S_IFDIR,
                st.st_dev == rootStat.st_dev
            else { continue }
            let child = openat(dirfd(dir), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if child >= 0, let d = fdopendir(child) { stack.append(d) } else if child >= 0 { close(child) }
        }
        return count
    }
}
