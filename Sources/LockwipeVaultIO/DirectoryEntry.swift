import Foundation

/// Reading a directory entry `readdir` returned; the vault's checks and the wipe engine's
/// walks both read names this way.
package enum DirectoryEntry {
    /// The entry's name with its NUL, read in place. The record `readdir` returns is only
    /// as long as its name (`d_reclen`): copying the whole 256-byte `d_name` out of it, as
    /// `entry.pointee.d_name` does, can read past the end of glibc's buffer and crash
    /// (it did, resuming a crypto-erase, whose no-key names are long).
    package static func name(of entry: UnsafeMutablePointer<dirent>) -> [CChar] {
        let start = UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \dirent.d_name)!)
            .assumingMemoryBound(to: CChar.self)
        return Array(UnsafeBufferPointer(start: start, count: strlen(start) + 1))
    }
}
