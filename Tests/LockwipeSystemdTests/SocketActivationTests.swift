import Glibc
import Testing

@testable import LockwipeSystemd

/// These tests set LISTEN_* in this process, so they hold the test environment lock.
@Suite(.serialized) struct SocketActivationTests {
    @Test func nothingPassedMeansNoDescriptors() {
        TestEnvironment.exclusive {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            #expect(SocketActivation.listenFileDescriptors() == [])
        }
    }

    @Test func descriptorsForAnotherProcessAreIgnoredAndTheEnvironmentIsCleared() {
        TestEnvironment.exclusive {
            setenv("LISTEN_PID", "\(getpid() + 1)", 1)
            setenv("LISTEN_FDS", "1", 1)
            setenv("LISTEN_FDNAMES", "control", 1)
            #expect(SocketActivation.listenFileDescriptors() == [])
            #expect(getenv("LISTEN_PID") == nil)
            #expect(getenv("LISTEN_FDS") == nil)
            #expect(getenv("LISTEN_FDNAMES") == nil)
        }
    }

    @Test func garbageCountIsIgnored() {
        TestEnvironment.exclusive {
            setenv("LISTEN_PID", "\(getpid())", 1)
            setenv("LISTEN_FDS", "lots", 1)
            #expect(SocketActivation.listenFileDescriptors() == [])
            #expect(getenv("LISTEN_FDS") == nil)
        }
    }

    @Test func descriptorsForThisProcessStartAtThree() {
        TestEnvironment.exclusive {
            // fd 3 cannot be made to exist here without clobbering whatever the test runner keeps
            // there, so the expectation follows its real state: sd_listen_fds marks it close-on-exec
            // and reports it when it is open, and fails (nothing passed) when it is not.
            let fd3Open = fcntl(3, F_GETFD) >= 0
            setenv("LISTEN_PID", "\(getpid())", 1)
            setenv("LISTEN_FDS", "1", 1)
            let fds = SocketActivation.listenFileDescriptors()
            #expect(getenv("LISTEN_PID") == nil)
            if fd3Open {
                #expect(fds == [3])
                #expect(fcntl(3, F_GETFD) & FD_CLOEXEC != 0)
            } else {
                #expect(fds == [])
            }
        }
    }
}
