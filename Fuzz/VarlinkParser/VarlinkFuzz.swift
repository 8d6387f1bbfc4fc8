import Foundation
import LockwipeProtocol

/// Fuzz target for the control socket's message parser: the NUL framing, the call
/// envelope and every request's parameters (what the daemon decodes from untrusted
/// peers), and every reply type (what lockwipectl decodes). Nothing may crash; framing
/// must stay within the input and never include a NUL.
///
/// Built with `-sanitize=fuzzer -DFUZZING` by `scripts/fuzz`, it is a libFuzzer target.
/// Built normally, it replays inputs: `lockwipe-fuzz-varlink FILE|DIR...` (a crash found
/// by the fuzzer stays a regression test that way).
enum VarlinkFuzz {
    static let maxMessageBytes = 65_536

    static func run(_ input: [UInt8]) {
        var rest = input[...]
        while !rest.isEmpty {
            switch VarlinkFraming.next(in: rest, maxMessageBytes: maxMessageBytes) {
            case .needMore, .tooLarge:
                return
            case .message(let range):
                precondition(range.lowerBound == rest.startIndex && range.upperBound < rest.endIndex, "frame out of bounds")
                precondition(!rest[range].contains(0), "a frame contains its terminator")
                decode(Data(rest[range]))
                rest = rest[(range.upperBound + 1)...]
            }
        }
    }

    static func decode(_ message: Data) {
        if let header = try? VarlinkMessage.decodeHeader(message) {
            _ = header.method.split(separator: ".")
        }
        _ = try? VarlinkMessage.decodeParameters(UserFilter.self, from: message)
        _ = try? VarlinkMessage.decodeParameters(TargetSelection.self, from: message)
        _ = try? VarlinkMessage.decodeParameters(UserParameter.self, from: message)
        _ = try? VarlinkMessage.decodeParameters(RegisterRequest.self, from: message)
        _ = try? VarlinkMessage.decodeParameters(UnlockRequest.self, from: message)
        _ = try? VarlinkMessage.decodeParameters(PasscodeRequest.self, from: message)
        _ = try? VarlinkMessage.decodeParameters(CredentialsRequest.self, from: message)
        _ = try? VarlinkMessage.decodeParameters(HistoryRequest.self, from: message)
        _ = try? VarlinkMessage.decodeParameters(InterfaceDescriptionRequest.self, from: message)
        _ = try? VarlinkMessage.decodeReply(StatusReport.self, from: message)
        _ = try? VarlinkMessage.decodeReply(ActionReply.self, from: message)
        _ = try? VarlinkMessage.decodeReply(HistoryReply.self, from: message)
        _ = try? VarlinkMessage.decodeReply(PolicyInfo.self, from: message)
        _ = try? VarlinkMessage.decodeReply(ServiceInfo.self, from: message)
    }
}

#if FUZZING
    @_cdecl("LLVMFuzzerTestOneInput")
    public func lockwipeFuzzVarlink(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
        VarlinkFuzz.run(Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }

    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
    ) -> CInt

    /// SwiftPM links an executable target's entry point under this name; hand over to libFuzzer.
    @_cdecl("lockwipe_fuzz_varlink_main")
    public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        var argc = argc
        var argv = argv
        return runFuzzerDriver(&argc, &argv) { data, size in lockwipeFuzzVarlink(data, size) }
    }
#else
    @main
    struct Replay {
        static func main() throws {
            var inputs: [String] = []
            for argument in CommandLine.arguments.dropFirst() {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else {
                    FileHandle.standardError.write(Data("lockwipe-fuzz-varlink: \(argument): no such file\n".utf8))
                    exit(2)
                }
                if isDirectory.boolValue {
                    inputs += try FileManager.default.contentsOfDirectory(atPath: argument).sorted().map { argument + "/" + $0 }
                } else {
                    inputs.append(argument)
                }
            }
            for path in inputs {
                VarlinkFuzz.run(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
            }
            print("replayed \(inputs.count) inputs")
        }
    }
#endif
