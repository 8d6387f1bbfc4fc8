#ifndef LOCKWIPE_CSYSTEMD_SHIM_H
#define LOCKWIPE_CSYSTEMD_SHIM_H

// No _GNU_SOURCE here: defining it changes glibc's own headers (fd_set's member names),
// and Clang then rejects this module next to SwiftGlibc. struct ucred needs it, so
// SO_PEERCRED is read into lockwipe_ucred below, which has the kernel's layout.
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <errno.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-id128.h>
#include <systemd/sd-login.h>

/// struct ucred's layout (linux/socket.h), without needing _GNU_SOURCE.
struct lockwipe_ucred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};

/// The credentials of the process at the other end of a Unix socket (SO_PEERCRED).
/// Returns 0 and fills the outputs, or -errno.
static inline int lockwipe_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct lockwipe_ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        return -errno;
    }
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

/// The first fd passed by socket activation (SD_LISTEN_FDS_START).
static inline int lockwipe_listen_fds_start(void) { return SD_LISTEN_FDS_START; }

#endif
