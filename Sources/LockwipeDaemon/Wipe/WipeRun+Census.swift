import Foundation

extension WipeRun {
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
