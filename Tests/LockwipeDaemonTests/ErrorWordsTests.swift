import Foundation
import LockwipeBase
import NIOCore
import Testing

@testable import LockwipeCheckIn
@testable import LockwipeDaemon

/// Errors reach the journal and replies in words: no type names, error domains or errno numbers.
@Suite struct ErrorWordsTests {
    @Test(arguments: [
        (CancellationError() as any Error, "interrupted before it finished"),
        (IOError(errnoCode: EACCES, reason: "open"), "permission denied"),
        (CocoaError(.fileReadNoPermission, userInfo: [NSFilePathErrorKey: "/etc/x.toml"]), "x.toml"),
        (FileSystemError("chmod 0700", "/srv/v", code: EPERM), "chmod 0700 /srv/v: Operation not permitted"),
    ])
    func inWords(_ error: any Error, _ phrase: String) {
        let text = ErrorWords.of(error)
        #expect(text.contains(phrase), "\(text)")
        for leak in ["CancellationError", "IOError", "NSCocoaErrorDomain", "errno", "Error Domain"] {
            #expect(!text.contains(leak), "\(text)")
        }
    }

    @Test(
        arguments: [
            (ECONNREFUSED, "the connection was refused: nothing accepts connections at 127.0.0.1:9"),
            (ETIMEDOUT, "the connection to 127.0.0.1:9 timed out"),
            (EHOSTUNREACH, "no route to the host of 127.0.0.1:9"),
            (ENETUNREACH, "the network is unreachable"),
            (ECONNRESET, "reset the connection"),
            (EACCES, "was not permitted"),
            (EIO, "input/output error (connecting to 127.0.0.1:9)"),
        ] as [(Int32, String)])
    func aFailedConnectInPlainWords(_ code: Int32, _ phrase: String) {
        let text = CheckInClient.connectWords(code, target: "127.0.0.1:9")
        #expect(text.contains(phrase), "\(text)")
        #expect(!text.contains("errno") && !text.contains("\(code))"), "\(text)")
    }

    @Test func aConnectionRefusedNamesTheURLWithoutItsSecrets() {
        let error = IOError(errnoCode: ECONNREFUSED, reason: "connection reset (error set)")
        let text = CheckInClient.describe(error, timeout: 3, url: "http://user:pw@127.0.0.1:9/lockwipe/settings?token=secret")
        #expect(text.hasPrefix("cannot connect to http://127.0.0.1:9/lockwipe/settings: the connection was refused"), "\(text)")
        #expect(!text.contains("secret") && !text.contains("pw@") && !text.contains("errno") && !text.contains("error set"), "\(text)")
        #expect(CheckInClient.describe(CancellationError(), timeout: 3) == CheckInClient.cancelledReason)
    }
}
