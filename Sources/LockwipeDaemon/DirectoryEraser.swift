import CLockwipeFS
import Foundation
import LockwipeProtocol

/// Removes everything inside vault directories. The one seam every wipe goes through:
/// a stronger engine (overwrite passes, crypto-erase) replaces the conformance, not callers.
public protocol VaultErasing: Sendable {
    /// Erases the contents of `directories`. Never throws: what could not be removed is in
    /// the summary's `skipped`, which makes the wipe incomplete.
    func erase(directories: [String]) async -> WipeSummary
}

/// Unlinks the contents of each vault, bottom-up, leaving the (empty) vault directory.
///
/// Guarantees, because a wipe runs as root over directories users control:
/// - every step is relative to an open directory descriptor (`openat`, `fstatat`,
///   `unlinkat`); no path is resolved again from the top once the walk started;
/// - symlinks are never followed (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`): a symlink is
///   unlinked as a symlink, so what it points to is untouched;
/// - mount points are never entered (mount id and `st_dev` checked), they are reported;
/// - a directory swapped between `fstatat` and `openat` is detected (device and inode
///   compared on the opened descriptor) and reported, not entered;
/// - a file's contents are never written: a hard link to a file outside loses only this
///   name.
/// The walk is iterative: depth is limited by open descriptors, not by the stack.
public struct DirectoryEraser: VaultErasing {
    public init() {}

    public func erase(directories: [String]) async -> WipeSummary {
        let started = ContinuousClock.now
        let result = try? await runBlocking { () -> Tally in
            var tally = Tally()
            for directory in directories { Self.eraseContents(of: directory, into: &tally) }
            return tally
        }
        let tally = result ?? Tally(skipped: [.init(path: directories.joined(separator: ", "), reason: "the wipe thread could not run")])
        let elapsed = ContinuousClock.now - started
        return WipeSummary(
            filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: tally.removed, skipped: tally.skipped,
            elapsedSeconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    struct Tally: Sendable {
        var removed = 0
        var skipped: [WipeSummary.Skipped] = []
    }

    private struct Frame {
        var dir: OpaquePointer
        var fd: Int32
        var path: String
        /// The name of this directory in its parent (nil for the vault root, which stays).
        var name: [CChar]?
    }

    static func eraseContents(of root: String, into tally: inout Tally) {
        func skip(_ path: String, _ reason: String) { tally.skipped.append(.init(path: path, reason: reason)) }
        func reason(_ code: Int32) -> String {
            switch code {
            case EPERM: return "operation not permitted (immutable or append-only?)"
            case EBUSY: return "busy (in use as a mount point?)"
            default: return String(cString: strerror(code))
            }
        }

        let rootFd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if rootFd < 0 {
            if errno == ENOENT { return }  // already gone: nothing left to erase
            skip(root, errno == ELOOP || errno == ENOTDIR ? "not a directory (a symlink?); refused" : reason(errno))
            return
        }
        var rootStat = stat()
        var rootMount: UInt64 = 0
        guard fstat(rootFd, &rootStat) == 0, let rootDir = fdopendir(rootFd) else {
            skip(root, reason(errno))
            close(rootFd)
            return
        }
        let haveMountIDs = lockwipe_mount_id(rootFd, "", &rootMount) == 0

        var stack = [Frame(dir: rootDir, fd: rootFd, path: root, name: nil)]
        while let top = stack.last {
            errno = 0
            guard let entry = readdir(top.dir) else {
                let code = errno
                if code != 0 { skip(top.path, "cannot be read: \(reason(code))") }
                closedir(top.dir)
                stack.removeLast()
                if let parent = stack.last, let name = top.name {
                    if unlinkat(parent.fd, name, AT_REMOVEDIR) == 0 {
                        tally.removed += 1
                    } else if errno != ENOTEMPTY || tally.skipped.isEmpty {
                        // ENOTEMPTY after a skipped entry is already explained by that entry.
                        skip(top.path, reason(errno))
                    }
                }
                continue
            }
            var name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix(while: { $0 != 0 }).map { CChar(bitPattern: $0) })
            }
            if name == [46] || name == [46, 46] { continue }  // "." and ".."
            name.append(0)
            let path = top.path + "/" + String(decoding: name.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)

            var st = stat()
            if fstatat(top.fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                if errno != ENOENT { skip(path, reason(errno)) }
                continue
            }
            if (st.st_mode & S_IFMT) == S_IFDIR {
                var mount: UInt64 = 0
                let otherMount = haveMountIDs && lockwipe_mount_id(top.fd, name, &mount) == 0 && mount != rootMount
                if st.st_dev != rootStat.st_dev || otherMount {
                    skip(path, "a mount point of another file system; not entered")
                    continue
                }
                let childFd = openat(top.fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                if childFd < 0 {
                    skip(path, errno == ELOOP || errno == ENOTDIR ? "changed into a symlink during the wipe; not followed" : reason(errno))
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
                stack.append(Frame(dir: childDir, fd: childFd, path: path, name: name))
            } else if unlinkat(top.fd, name, 0) == 0 {
                tally.removed += 1
            } else if errno != ENOENT {
                skip(path, reason(errno))
            }
        }
    }
}
