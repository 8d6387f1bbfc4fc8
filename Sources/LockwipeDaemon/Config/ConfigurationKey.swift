import Foundation
import LockwipeCore
import LockwipeMetrics
import LockwipeWipe
import TOMLKit

/// One key of `lockwiped.toml` (`[table] name`) and how its value is read and applied, in
/// one step: a key is built from a `Reader` of its kind and a setter that receives the value
/// as that kind, so a value reaches the configuration only as what its reader checked it to
/// be (no separate validation to rely on, nothing to force-unwrap).
struct ConfigurationKey: Sendable {
    let table: String
    let name: String
    /// Applies the value to the configuration, or says what is wrong with it (then nothing
    /// is applied).
    let apply: @Sendable (inout Configuration, TOMLValue) -> String?

    init<Value>(table: String, name: String, _ reader: Reader<Value>, set: @escaping @Sendable (inout Configuration, Value) -> Void) {
        self.table = table
        self.name = name
        apply = { configuration, value in
            do throws(Problem) {
                set(&configuration, try reader.read(value))
                return nil
            } catch {
                return error.message
            }
        }
    }

    /// What is wrong with a value, in the operator's words (the message of
    /// `FILE:LINE: KEY: message`).
    struct Problem: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    /// How a value of one kind is read: as `Value`, or the problem with it.
    struct Reader<Value>: Sendable {
        let read: @Sendable (TOMLValue) throws(Problem) -> Value
    }
}

extension ConfigurationKey.Reader {
    /// The value as an integer, or "must be an integer".
    static func integer(_ value: TOMLValue) throws(ConfigurationKey.Problem) -> Int {
        guard value.type == .int, let n = value.int else {
            throw .init("must be an integer, not \(value.type.withArticle) (\(value.debugDescription))")
        }
        return n
    }

    /// The value as a string, or "must be `what`".
    static func string(_ value: TOMLValue, mustBe what: String) throws(ConfigurationKey.Problem) -> String {
        guard value.type == .string, let s = value.string else { throw .init("must be \(what), not \(value.type.withArticle)") }
        return s
    }
}

extension ConfigurationKey.Reader where Value == Int {
    static var nonNegativeInt: Self { bounded(below: 0, "must be 0 or more") }
    static var positiveInt: Self { bounded(below: 1, "must be 1 or more") }

    /// At least `least` (else `message`), at most `Int32.max`.
    private static func bounded(below least: Int, _ message: String) -> Self {
        Self { value throws(ConfigurationKey.Problem) in
            let n = try integer(value)
            if n < least { throw .init("\(message), not \(n)") }
            if n > Int(Int32.max) { throw .init("is too large (\(n))") }
            return n
        }
    }

    /// `[wipe] passes`: 0 (unlink only) to `WipeOptions.maxPasses`.
    static var passes: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let n = try integer(value)
            guard (0...WipeOptions.maxPasses).contains(n) else { throw .init("must be 0 (unlink only) to \(WipeOptions.maxPasses), not \(n)") }
            return n
        }
    }

    /// `[passcode] min_character_classes`: 0 to 4.
    static var characterClasses: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let n = try integer(value)
            guard (0...4).contains(n) else { throw .init("must be 0 (no rule) to 4 (all of digits, lower case, upper case, special), not \(n)") }
            return n
        }
    }
}

extension ConfigurationKey.Reader where Value == Bool {
    static var bool: Self {
        Self { value throws(ConfigurationKey.Problem) in
            guard value.type == .bool, let b = value.bool else {
                throw .init("must be true or false, not \(value.type.withArticle) (\(value.debugDescription))")
            }
            return b
        }
    }
}

extension ConfigurationKey.Reader where Value: CaseIterable & RawRepresentable & Sendable, Value.RawValue == String {
    /// One of `Value`'s names; a wrong one is quoted in the message, its first `quoted`
    /// characters when given.
    static func choice(quoting quoted: Int? = nil) -> Self {
        Self { value throws(ConfigurationKey.Problem) in
            let names = Value.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: " or ")
            let s = try string(value, mustBe: names)
            guard let chosen = Value(rawValue: s) else { throw .init("must be \(names), not \"\(quoted.map { String(s.prefix($0)) } ?? s)\"") }
            return chosen
        }
    }
}

extension ConfigurationKey.Reader where Value == WipeOptions.Pattern {
    static var pattern: Self { choice() }
}

extension ConfigurationKey.Reader where Value == PolicyLockLift.Setting {
    static var liftAfterContact: Self { choice(quoting: 60) }
}

extension ConfigurationKey.Reader where Value == OutboxConfiguration.OfflineWipe {
    static var offlineWipe: Self { choice() }
}

extension ConfigurationKey.Reader where Value == ServerProtocol {
    static var serverProtocol: Self { choice(quoting: 60) }
}

extension ConfigurationKey.Reader where Value == String {
    static var serverURL: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let s = try string(value, mustBe: "a string (a URL)")
            if let problem = ServerURL.problem(s) { throw .init(problem) }
            return s
        }
    }

    /// An absolute path to a readable regular file.
    static var readableFile: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let s = try string(value, mustBe: "a string (a path)")
            guard s.hasPrefix("/") else { throw .init("must be an absolute path, not \"\(s)\"") }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: s, isDirectory: &isDirectory), !isDirectory.boolValue else {
                throw .init("\(s): no such file")
            }
            guard FileManager.default.isReadableFile(atPath: s) else { throw .init("\(s): not readable") }
            return s
        }
    }

    /// Sent as a header value: visible ASCII only, so it can never split a request.
    static var headerValue: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let s = try string(value, mustBe: "a string")
            if s.isEmpty { throw .init("must not be empty") }
            if s.utf8.count > 256 { throw .init("must be at most 256 characters long") }
            guard s.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw .init("may only contain visible ASCII characters (no spaces, control characters or non-ASCII), not \"\(s.prefix(60))\"")
            }
            return s
        }
    }

    static var metricsTextfile: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let s = try string(value, mustBe: "a string (a path ending in .prom)")
            if let problem = MetricsTextfile.pathProblem(s) { throw .init(problem) }
            return s
        }
    }

    static var groupName: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let s = try string(value, mustBe: "a string")
            let allowed = s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_-.".contains($0)) }
            guard !s.isEmpty, allowed else { throw .init("must be a group name ([A-Za-z0-9_.-]+), not \"\(s)\"") }
            return s
        }
    }
}

extension ConfigurationKey.Reader where Value == UInt32 {
    /// `[metrics] mode`: an octal mode as a string that lets no one but root write the file.
    static var fileMode: Self {
        Self { value throws(ConfigurationKey.Problem) in
            guard value.type == .string, let s = value.string else {
                throw .init("must be an octal file mode as a string (\"0640\"), not \(value.type.withArticle) (\(value.debugDescription))")
            }
            guard let mode = MetricsFileOptions.parseMode(s) else {
                throw .init("must be an octal file mode of 3 or 4 digits such as \"0640\" (no setuid, setgid or sticky bit), not \"\(s.prefix(20))\"")
            }
            if mode & 0o022 != 0 {
                throw .init("\"\(s)\" lets others than root write the file (they could feed the fleet false readings); use \"0640\" or \"0644\"")
            }
            return mode
        }
    }
}

extension ConfigurationKey.Reader where Value == [String] {
    /// `[vault] allow_under`: directories where vaults may be registered, normalized.
    static var vaultAllowances: Self {
        Self { value throws(ConfigurationKey.Problem) in
            guard value.type == .array, let list = value.array else {
                throw .init("must be a list of directories ([\"/opt/fieldapp/data\"]), not \(value.type.withArticle)")
            }
            for item in list {
                guard item.type == .string, let s = item.string else { throw .init("must hold only strings (paths), not \(item.type.withArticle)") }
                if let problem = DirectoryRules.allowanceProblem(s) { throw .init(problem) }
            }
            return list.compactMap { $0.string.flatMap(DirectoryRules.normalize) }
        }
    }
}

extension ConfigurationKey.Reader where Value == SealSetting {
    /// `[keys] seal`.
    static var sealSetting: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let words = SealSetting.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            let s = try string(value, mustBe: "one of \(words)")
            guard let setting = SealSetting(rawValue: s) else { throw .init("must be one of \(words), not \"\(s.prefix(40))\"") }
            return setting
        }
    }
}

extension ConfigurationKey.Reader where Value == String {
    /// `[keys] tpm2_device`: a device node (/dev/tpmrm0) or a tpm2-tss TCTI ("swtpm:path=...").
    static var tpm2Device: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let s = try string(value, mustBe: "a TPM2 device (\"/dev/tpmrm0\") or a TCTI (\"swtpm:path=/run/swtpm/sock\")")
            guard !s.isEmpty, s.utf8.count <= 4096, s.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else {
                throw .init("must be a TPM2 device (\"/dev/tpmrm0\") or a TCTI (\"swtpm:path=/run/swtpm/sock\"), without spaces or control characters")
            }
            guard s.hasPrefix("/") || s.contains(":") else {
                throw .init("must be an absolute device path (\"/dev/tpmrm0\") or DRIVER:PARAMETERS (\"swtpm:path=/run/swtpm/sock\"), not \"\(s.prefix(60))\"")
            }
            return s
        }
    }

    /// `[keys] tpm2_pcrs`: PCR numbers 0 to 23 joined by "+" ("7", "7+14"), or "" for none.
    static var tpm2PCRs: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let s = try string(value, mustBe: "PCR numbers joined by + (\"7\", \"7+14\"), or \"\" for none")
            if s.isEmpty { return s }
            for part in s.split(separator: "+", omittingEmptySubsequences: false) {
                guard let n = Int(part), (0...23).contains(n), part.allSatisfy(\.isNumber) else {
                    throw .init("must be PCR numbers 0 to 23 joined by + (\"7\", \"7+14\"), or \"\" for none, not \"\(s.prefix(40))\"")
                }
            }
            return s
        }
    }
}

extension ConfigurationKey.Reader where Value == RecoveryPublicKey {
    /// `[keys] recovery_public_key`: the organisation's X25519 public key in base64, as
    /// `lockwipectl recovery-key new` prints it.
    static var recoveryPublicKey: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let s = try string(value, mustBe: "the base64 public key lockwipectl recovery-key new prints")
            do throws(RecoveryKeyError) {
                return try RecoveryPublicKey(base64: s)
            } catch {
                throw .init(error.description)
            }
        }
    }
}

extension ConfigurationKey.Reader where Value == String {
    /// `[outbox] directory`: a path relative to each vault directory (`OutboxConfiguration`).
    static var outboxDirectory: Self {
        Self { value throws(ConfigurationKey.Problem) in
            let s = try string(value, mustBe: "a path relative to the vault directory (\"outbox\")")
            if let problem = OutboxConfiguration.directoryProblem(s) { throw .init(problem) }
            return s
        }
    }
}
