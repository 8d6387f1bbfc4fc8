// offline-code: the helpdesk's challenge and response for a machine that cannot reach the
// policy server (docs/offline-codes.md). Each verb prints its result alone on the last line.

import ArgumentParser
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

struct OfflineCodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline-code",
        abstract: "Lift an offline lock or extend the offline lease with a code from the helpdesk.",
        discussion: """
            On the locked machine, 'challenge' prints a challenge to read to the helpdesk; the \
            helpdesk, holding the fleet secret, computes the response with 'respond' (no daemon, \
            no root needed) and reads it back; 'enter' does what the challenge asked, once. \
            A challenge binds this machine, the registration, what it asks and a counter: a \
            response answers that challenge only. Wrong responses back off as wrong passcodes \
            do and never wipe. 'provision' (root, once) stores this machine's key, derived from \
            the fleet secret, which itself is not stored. See docs/offline-codes.md.
            """,
        subcommands: [Challenge.self, Respond.self, Enter.self, Provision.self])

    struct Challenge: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "challenge",
            abstract: "Print a new challenge for the helpdesk (the user herself, or an administrator).",
            discussion: """
                Without --extend the challenge asks to lift the lock set by the policy server or \
                the offline policy; with --extend DAYS, to extend the offline lease by DAYS (at \
                most [offline_codes] max_lease_days). A new challenge replaces the registration's \
                previous one. The challenge is the last line.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: ArgumentHelp("The user (default: your own registration).", valueName: "user"), completion: .custom(completeUsers))
        var user: String?
        @Option(name: .customLong("extend"), help: ArgumentHelp("Ask to extend the offline lease by this many days.", valueName: "days"))
        var extendDays: Int?
        @Flag(help: "Print JSON (--json=short: on one line).") var json = false

        func run() throws {
            let reply = try global.call(.offlineCodeChallenge, OfflineCodeChallengeRequest(user: user, extendDays: extendDays), OfflineCodeChallengeReply.self)
            if json { return try printJSON(reply) }
            print("\(reply.user): a challenge to \(reply.request) on machine \(reply.machine); read it to the helpdesk:")
            print(reply.challenge)
        }
    }

    struct Respond: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "respond",
            abstract: "Compute the response to a challenge (the helpdesk; needs the fleet secret, no daemon, no root).",
            discussion: """
                Reads the fleet secret from --fleet-key-file (its bytes, trailing newlines \
                removed; at least 16). Checks the challenge's check characters first and names \
                the group that was misread. Prints what the challenge asks, then the response \
                alone on the last line. It asks no daemon: the global options are accepted \
                and change nothing.
                """)
        // Accepted as by every verb (they may stand anywhere on the line); unused.
        @OptionGroup var global: GlobalOptions
        @Option(name: .customLong("fleet-key-file"), help: ArgumentHelp("The file holding the fleet secret.", valueName: "file"), completion: .file())
        var fleetKeyFile: String
        @Argument(help: ArgumentHelp("The challenge as read out (groups may be separated by dashes or spaces).", valueName: "challenge"))
        var challenge: [String]

        func run() throws {
            let challenge: OfflineCode.Challenge
            do {
                challenge = try OfflineCode.readChallenge(self.challenge.joined(separator: " "))
            } catch {
                throw CommandFailure(code: ExitStatus.usage, message: "the challenge does not read: \(error.description)")
            }
            let secret = try readFleetSecret(fleetKeyFile)
            let key = OfflineCode.machineKey(fleetSecret: secret, machine: challenge.machine)
            print(
                "machine \(OfflineCode.hex(machine: challenge.machine)), registration \(String(challenge.registration, radix: 16)), counter \(challenge.counter): \(challenge.request)"
            )
            print(OfflineCode.response(to: challenge, machineKey: key))
        }
    }

    struct Enter: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "enter",
            abstract: "Enter the helpdesk's response: does what the challenge asked, once.",
            discussion: """
                The user herself or an administrator. A code whose check character does not \
                match is refused here, before lockwiped sees it. The result is the last line.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(
            help: ArgumentHelp("[user] code: the user (default: your own registration) and the response as read out.", valueName: "user-and-code"),
            completion: .custom(completeUsers))
        var words: [String]

        func validate() throws {
            if words.isEmpty { throw ValidationError("give the code the helpdesk read out") }
        }

        func run() throws {
            // The code alone (perhaps in two words), or a user name first.
            var user: String?
            var code = words.joined(separator: " ")
            if (try? OfflineCode.readResponse(code)) == nil, words.count > 1 {
                user = words[0]
                code = words.dropFirst().joined(separator: " ")
            }
            do {
                _ = try OfflineCode.readResponse(code)
            } catch {
                throw CommandFailure(code: ExitStatus.usage, message: "the code does not read: \(error.description)")
            }
            try printResults(try global.call(.offlineCodeEnter, OfflineCodeEnterRequest(user: user, code: code), ActionReply.self))
        }
    }

    struct Provision: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "provision",
            abstract: "Store this machine's offline-code key, derived from the fleet secret (root, once).",
            discussion: """
                Derives this machine's key from the fleet secret and the machine id (from \
                /etc/machine-id) and hands only that key to lockwiped, which stores it root-only \
                in its state directory; the fleet secret is not stored. Running it again replaces \
                the key; once the machine's challenges under its key are used up (2^20 - 1 of \
                them), it moves the codes to the next key epoch, so that no challenge ever \
                repeats under one key. The machine id is the last line.
                """)
        @OptionGroup var global: GlobalOptions
        @Option(name: .customLong("fleet-key-file"), help: ArgumentHelp("The file holding the fleet secret.", valueName: "file"), completion: .file())
        var fleetKeyFile: String

        func run() throws {
            let machineFile = try UserFile.contents("/etc/machine-id", what: "machine id")
            // The key epoch lockwiped provisions for (the next one once its challenges are used up).
            let status = try global.call(.getStatus, StatusRequest(), StatusReport.self)
            let epoch = status.offlineCodes?.provisionEpoch ?? 0
            let machine = OfflineCode.machineID(fromMachineID: String(decoding: machineFile, as: UTF8.self), epoch: epoch)
            var secret = try readFleetSecret(fleetKeyFile)
            var key = OfflineCode.machineKey(fleetSecret: secret, machine: machine)
            defer {
                for i in secret.indices { secret[i] = 0 }
                for i in key.indices { key[i] = 0 }
            }
            let hex = key.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            let reply = try global.call(
                .provisionOfflineCodes, ProvisionOfflineCodesRequest(machine: OfflineCode.hex(machine: machine), machineKey: hex), ProvisionOfflineCodesReply.self)
            print(reply.detail)
            print(reply.machine)
        }
    }
}

/// The fleet secret in `path`: its bytes without trailing newlines, at least 16.
private func readFleetSecret(_ path: String) throws -> [UInt8] {
    let secret = OfflineCode.fleetSecret(fromFile: Array(try UserFile.contents(path, what: "fleet key")))
    guard secret.count >= OfflineCode.minimumSecretLength else {
        throw CommandFailure(
            code: ExitStatus.usage,
            message: "the fleet key file \(path) holds \(secret.count) bytes; a fleet secret has at least \(OfflineCode.minimumSecretLength) (for example: openssl rand -base64 32)"
        )
    }
    return secret
}
