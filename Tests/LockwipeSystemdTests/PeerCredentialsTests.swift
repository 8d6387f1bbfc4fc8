import Glibc
import Testing

@testable import LockwipeSystemd

@Suite struct PeerCredentialsTests {
    @Test func socketPairPeerIsThisProcess() throws {
        var fds: [CInt] = [-1, -1]
        #expect(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let expected = PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())
        #expect(try PeerCredentials.of(fileDescriptor: fds[0]) == expected)
        #expect(try PeerCredentials.of(fileDescriptor: fds[1]) == expected)
    }

    @Test func nonSocketThrowsENOTSOCK() {
        var fds: [CInt] = [-1, -1]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let error = #expect(throws: SystemdError.self) { try PeerCredentials.of(fileDescriptor: fds[0]) }
        #expect(error?.errno == ENOTSOCK)
        #expect(error?.description.contains("getsockopt(SO_PEERCRED) on fd \(fds[0])") == true)
        #expect(error?.description.contains("(errno \(ENOTSOCK))") == true)
    }

    @Test func badDescriptorThrowsEBADF() {
        let error = #expect(throws: SystemdError.self) { try PeerCredentials.of(fileDescriptor: -1) }
        #expect(error?.errno == EBADF)
        #expect(error?.description == "getsockopt(SO_PEERCRED) on fd -1 failed: Bad file descriptor (errno 9)")
    }
}
