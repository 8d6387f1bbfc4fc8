import Foundation
import NIOCore

/// An error as an operator reads it in the journal or a reply: the daemon's own errors are
/// sentences already (`FileSystemError`, `VaultOpenError`, ...); what comes from below is
/// put into words, never shown as a Swift type name (`CancellationError()`), an error
/// domain (`NSCocoaErrorDomain error 256`) or a bare errno number.
package enum ErrorWords {
    package static func of(_ error: any Error) -> String {
        switch error {
        case is CancellationError:
            return "interrupted before it finished: lockwiped is stopping, or what started it was cancelled"
        case let e as IOError:
            return sentence(e.errnoCode)
        case let e as CocoaError:
            // Foundation's own sentence ("The file “x” couldn’t be opened because ..."), not its domain and code.
            let underlying = (e.userInfo[NSUnderlyingErrorKey] as? NSError).map { " (\(sentence(Int32($0.code))))" } ?? ""
            let reason = (e as NSError).localizedFailureReason ?? e.localizedDescription
            let path = e.filePath ?? e.url?.path
            return (path.map { "\($0): " } ?? "") + reason + underlying
        default:
            return "\(error)"
        }
    }

    /// `code`'s text, lower-cased to continue a sentence ("permission denied").
    package static func sentence(_ code: Int32) -> String {
        let text = String(cString: strerror(code))
        return text.first.map { $0.lowercased() + text.dropFirst() } ?? "unknown error"
    }
}
