import CSystemd

/// Socket activation: the file descriptors systemd passed (from SD_LISTEN_FDS_START = 3).
public enum SocketActivation {
    /// `sd_listen_fds(1)` semantics: only when LISTEN_PID is this process; marks the fds
    /// close-on-exec and unsets LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES so hooks and children
    /// do not think the sockets are theirs. Empty when nothing (valid) was passed.
    public static func listenFileDescriptors() -> [CInt] {
        let count = sd_listen_fds(1)
        guard count > 0 else { return [] }
        let start = lockwipe_listen_fds_start()
        return Array(start..<(start + count))
    }
}
