// recovery-key and recover: the organisation's recovery key (docs/key-material.md,
// "Recovery"). The private key never reaches lockwiped: `recover` opens each vault key
// here and hands lockwiped only that key.

import ArgumentParser
import Crypto
import LockwipeCore
import LockwipeProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

struct RecoveryKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recovery-key",
        abstract: "Make the organisation's recovery key pair (no daemon, no root needed).",
        discussion: """
            Every vault key is also sealed to the organisation's recovery public key \
            ([keys] recovery_public_key in lockwiped.toml), so that a cleared TPM, a new board \
            or a firmware update never loses a vault for good: 'lockwipectl recover' with the \
            private key brings it back. Keep the private key offline, as the fleet secret of \
            the offline codes. See docs/key-material.md.
            """,
        subcommands: [New.self, Public.self])

    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "new",
            abstract: "Write a new private key to FILE (0600; never over an existing file) and print its public key.",
            discussion: """
                The last line is the line for [keys] in /etc/lockwipe/lockwiped.toml on every \
                machine: recovery_public_key = "...". It asks no daemon: the global options are \
                accepted and change nothing.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: ArgumentHelp("Where to write the private key.", valueName: "file"), completion: .file())
        var file: String

        func run() throws {
            let key = Curve25519.KeyAgreement.PrivateKey()
            let text = Array(RecoveryKey.fileText(key).utf8)
            let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                let why: String
                switch errno {
                case EEXIST: why = "it exists already (a recovery key is never written over)"
                case ENOENT: why = "its directory does not exist"
                case EACCES, EPERM, EROFS: why = "you may not create files there"
                case ELOOP: why = "it is a symbolic link"
                default: why = "the system refused to create it (error \(errno))"
                }
                throw CommandFailure(code: ExitStatus.failed, message: "cannot write the private key to \(file): \(why)")
            }
            defer { close(fd) }
            let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written == text.count, fsync(fd) == 0 else {
                // Emptied through the descriptor, not unlinked by name: the name may no
                // longer be this file.
                _ = ftruncate(fd, 0)
                throw CommandFailure(code: ExitStatus.failed, message: "cannot write the private key to \(file): it was left empty; remove it and try again")
            }
            let publicKey = RecoveryPublicKey(key.publicKey)
            print("wrote the private key of recovery key \(publicKey.identifier) to \(file): keep it offline; whoever holds it can open every vault sealed to it")
            print("put this line in [keys] of /etc/lockwipe/lockwiped.toml on every machine, then restart lockwiped:")
            print("recovery_public_key = \"\(publicKey.base64)\"")
        }
    }

    struct Public: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "public",
            abstract: "Print the configuration line of the public key of the private key in FILE.",
            discussion: "It asks no daemon: the global options are accepted and change nothing.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: ArgumentHelp("The private key file.", valueName: "file"), completion: .file())
        var file: String

        func run() throws {
            let publicKey = RecoveryPublicKey(try readRecoveryPrivateKey(file).publicKey)
            print("recovery key \(publicKey.identifier):")
            print("recovery_public_key = \"\(publicKey.base64)\"")
        }
    }
}

struct Recover: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recover",
        abstract: "Bring back encrypted vaults with the organisation's recovery private key (administrators).",
        discussion: """
            For a machine whose sealed machine key no longer opens (a cleared TPM, a new board, \
            a firmware update that changed the PCRs), or a forgotten passcode. Opens each vault \
            key from its recovery wrap here, with --key-file, and hands only that key to \
            lockwiped, which checks it is the vault's key and wraps it again: under the machine \
            key (a machine key that does not open is set aside, not destroyed, and a new one \
            sealed to the machine as it is now), or under a new passcode. A vault a passcode \
            protected gets a new one (--passcode-stdin: one line), since the old one cannot be \
            checked. A vault locked at start-up because its key could not be opened is then \
            opened; any other lock stays. Without a user: every encrypted vault. One line per \
            vault; exits 1 when any was not recovered.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The user (default: every encrypted vault).", valueName: "user"), completion: .custom(completeUsers))
    var user: String?
    @Option(name: .customLong("key-file"), help: ArgumentHelp("The recovery private key file (lockwipectl recovery-key new).", valueName: "file"), completion: .file())
    var keyFile: String
    @Flag(name: .customLong("passcode-stdin"), help: "Read a new passcode for the vault from the first line of standard input (needs a user).")
    var passcodeStdin = false

    func validate() throws {
        if passcodeStdin && user == nil { throw ValidationError("--passcode-stdin sets one vault's passcode: name its user") }
    }

    func run() throws {
        let privateKey = try readRecoveryPrivateKey(keyFile)
        let mine = RecoveryPublicKey(privateKey.publicKey).identifier
        let newPasscode = passcodeStdin ? try PasscodeInput.line("new passcode") : nil
        let reply = try global.call(.getRecoveryWraps, RecoveryWrapsRequest(user: user), RecoveryWrapsReply.self)
        var failures = 0
        for wrap in reply.wraps {
            do {
                guard let encapsulated = Data(base64Encoded: wrap.encapsulated), let sealed = Data(base64Encoded: wrap.sealed) else {
                    throw CommandFailure(code: ExitStatus.failed, message: "lockwiped sent a recovery wrap that is not base64")
                }
                var key: [UInt8]
                do throws(RecoveryKeyError) {
                    key = try RecoveryKey.unwrap(
                        RecoveryWrap(recipient: wrap.recoveryKey, encapsulated: encapsulated, sealed: sealed), privateKey: privateKey,
                        registration: RegistrationID(wrap.registrationId))
                } catch {
                    throw CommandFailure(code: ExitStatus.failed, message: "not recovered: \(error.description)")
                }
                let encoded = Data(key).base64EncodedString()
                for i in key.indices { key[i] = 0 }
                let result = try global.call(
                    .recover, RecoverRequest(user: wrap.user, registrationId: wrap.registrationId, key: encoded, newPasscode: newPasscode), ActionReply.self)
                try printResults(result)
            } catch let failure as CommandFailure {
                failures += 1
                print("\(wrap.user): \(failure.message)")
            }
        }
        for missing in reply.missing {
            failures += 1
            print("\(missing.user): not recoverable: \(missing.reason)")
        }
        if reply.wraps.isEmpty && reply.missing.isEmpty { print("no encrypted vault is registered") }
        if failures > 0 {
            throw CommandFailure(code: ExitStatus.failed, message: "\(TextFormat.count(failures, "vault was", "vaults were")) not recovered (recovery key \(mine))")
        }
    }
}

/// The recovery private key in `path` (`lockwipectl recovery-key new`).
func readRecoveryPrivateKey(_ path: String) throws -> Curve25519.KeyAgreement.PrivateKey {
    var data = try UserFile.contents(path, what: "recovery key", limit: 4096)
    defer { data.resetBytes(in: 0..<data.count) }
    do {
        return try RecoveryKey.privateKey(fileText: String(decoding: data, as: UTF8.self))
    } catch {
        throw CommandFailure(code: ExitStatus.usage, message: "the recovery key file \(path) \(error.description)")
    }
}
