import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProtocol
import Logging

/// Offline codes (docs/offline-codes.md): a challenge for the helpdesk, its response
/// entered once, and the machine's key. The encoding and the key derivation are
/// `OfflineCode`'s (LockwipeCore); what a response may lift is `PolicyLockLift`'s, with
/// proof `.offlineCode`; the lift itself is the server contact's (`openWithoutPasscode`),
/// and the lease that comes with it `grantLease`'s. Wrong responses back off as wrong
/// passcodes do (`PasscodeBackoff`) and never count toward `retry_limit`.
extension Manager {

    /// Whether offline codes are provisioned, for `status` (a key that cannot be read, or was
    /// derived for another machine id, is said so in `machine`'s place).
    /// Kept once read, so that `status` does no file I/O; a read that failed is tried again
    /// at the next call. Entering a code reads the key file itself.
    public func offlineCodesInfo() async -> OfflineCodesInfo {
        if let known = offlineCodesKnown { return known }
        let file = context.offlineCodeKeyFile
        let stored: UInt64?
        let now: RegistrationContext.OfflineCodeEpoch
        do {
            stored = try await BlockingPool.run { try file.load()?.machine }
            now = try await context.offlineCodeEpoch()
        } catch {
            // The key file, the counters, or /etc/machine-id, which the codes name the machine by.
            return OfflineCodesInfo(provisioned: false, machine: "cannot be checked: \(ErrorWords.of(error))")
        }
        let machine = now.machine
        let info: OfflineCodesInfo
        if now.usedUp {
            info = OfflineCodesInfo(
                provisioned: false,
                machine: "the \(OfflineCode.countersPerEpoch) challenges of key epoch \(now.epoch) are used up: provision again, for key epoch \(now.epoch + 1)",
                provisionEpoch: now.epoch + 1)
        } else if let stored, stored != machine {
            info = OfflineCodesInfo(
                provisioned: false,
                machine: "the key was derived for machine \(OfflineCode.hex(machine: stored)), not this one (\(OfflineCode.hex(machine: machine))): provision again",
                provisionEpoch: now.epoch)
        } else {
            info = OfflineCodesInfo(provisioned: stored != nil, machine: OfflineCode.hex(machine: machine), provisionEpoch: now.epoch)
        }
        // A provisioning that ended while this read was under way has said the newer state.
        if offlineCodesKnown == nil { offlineCodesKnown = info }
        return offlineCodesKnown ?? info
    }

    // MARK: Provision

    /// Stores this machine's key (derived by the caller from the fleet secret for `machine`).
    public func provisionOfflineCodes(machine: String, machineKey: String, by caller: Caller) async throws -> ProvisionOfflineCodesReply {
        guard let key = Registration.bytes(hex: machineKey), key.count == 32 else {
            throw ManagerError.invalidParameter("machine_key", reason: "the machine key must be 32 bytes in hex (64 hex digits)")
        }
        // The key is for the current epoch, or for the next once the current one's
        // counters are used up; the counters move to it before its key is stored, so that
        // no crash leaves a used-up epoch counting again, nor the old key with new counters.
        let now: RegistrationContext.OfflineCodeEpoch
        let this: UInt64
        do {
            now = try await context.offlineCodeEpoch()
            let target = now.usedUp ? now.epoch + 1 : now.epoch
            this = now.usedUp ? try await BlockingPool.run { try OfflineCodeKeyFile.thisMachine(epoch: target) } : now.machine
        } catch {
            throw ManagerError.actionFailed("offline codes cannot be provisioned: \(ErrorWords.of(error))")
        }
        let target = now.usedUp ? now.epoch + 1 : now.epoch
        guard machine.lowercased() == OfflineCode.hex(machine: this) else {
            throw ManagerError.invalidParameter(
                "machine",
                reason: "the key was derived for machine \(machine), but this machine is \(OfflineCode.hex(machine: this)) at key epoch \(target) (from /etc/machine-id)")
        }
        offlineCodesKnown = nil
        if now.usedUp {
            let moved: Bool
            do {
                moved = try await context.store.advanceOfflineCodeEpoch(to: target, event: nil)
            } catch {
                throw context.stateFailure("this machine", "provisioning the offline codes", error)
            }
            guard moved else { throw ManagerError.actionFailed("the offline codes were provisioned meanwhile: run provision again") }
        }
        let file = context.offlineCodeKeyFile
        let replaced: Bool
        do {
            replaced = try await BlockingPool.run { try file.store(.init(machine: this, key: key)) }
        } catch {
            throw ManagerError.actionFailed("cannot store the offline-code key in \(file.path): \(ErrorWords.of(error))")
        }
        offlineCodesKnown = OfflineCodesInfo(provisioned: true, machine: OfflineCode.hex(machine: this), provisionEpoch: target)
        let detail =
            (replaced ? "offline-code key replaced" : "offline codes provisioned") + " for machine \(OfflineCode.hex(machine: this))"
            + (target > 0 ? " at key epoch \(target)" : "") + "; the fleet secret was not stored"
        context.logger.notice(
            "\(detail)",
            metadata: [
                "message_id": MessageID.offlineCodesProvisioned.metadata, "machine": .string(OfflineCode.hex(machine: this)),
                "peer_uid": "\(caller.credentials.uid)",
            ])
        return ProvisionOfflineCodesReply(machine: OfflineCode.hex(machine: this), detail: detail)
    }

    // MARK: Challenge

    /// A new challenge for `user` (replacing her outstanding one): to lift her lock
    /// (`extendDays` nil), or to extend her offline lease by `extendDays`.
    public func offlineCodeChallenge(user: String, extendDays: Int?, by caller: Caller) async throws -> OfflineCodeChallengeReply {
        let maxDays = min(context.configuration.offlineCodes.maxLeaseDays, OfflineCode.maxDays)
        if let days = extendDays, days < 1 || days > maxDays {
            throw ManagerError.invalidParameter(
                "extend_days", reason: "an extension of \(days) day\(days == 1 ? "" : "s") is refused: it must be 1 to \(maxDays) days ([offline_codes] max_lease_days)")
        }
        let provisioned = await offlineCodesInfo()
        guard provisioned.provisioned, let machineHex = provisioned.machine, let machine = UInt64(machineHex, radix: 16),
            let epoch = provisioned.provisionEpoch
        else {
            throw ManagerError.actionFailed(
                "offline codes are not provisioned on this machine"
                    + (provisioned.machine.map { $0.contains(" ") ? " (\($0))" : "" } ?? "")
                    + ": an administrator runs lockwipectl offline-code provision --fleet-key-file FILE")
        }
        let request: OfflineCode.Request = extendDays.map { .extend(days: $0) } ?? .lift
        return try await registration(named: user).withTurn { turn in
            let r = turn.record
            guard !r.state.isWipeCommitted else {
                throw ManagerError.wrongState(user: user, current: r.state, reason: "\(user) is \(r.state.rawValue): an offline code cannot undo a wipe")
            }
            if request == .lift, let why = Registration.nothingToLift(r) { throw ManagerError.actionFailed(why) }
            let now = context.clock.now().wall
            let registrationBits = OfflineCode.registrationBits(ofID: r.id)
            let detailWithout = "challenge to \(request) by \(Registration.who(caller))"
            var challenge = OfflineCode.Challenge(machine: machine, registration: registrationBits, request: request, counter: 0)
            let template = context.event(user, .offlineCodeChallenge, Registration.trigger(caller), detailWithout, at: now)
            let issue: OfflineChallengeIssue
            do {
                issue = try await context.store.issueOfflineChallenge(user, registrationID: r.id, days: extendDays ?? 0, epoch: epoch, at: now) {
                    [challenge] counter in
                    var c = challenge
                    c.counter = counter
                    var e = template
                    e.detail = "\(detailWithout): \(c.text) (counter \(counter))"
                    return e
                }
            } catch {
                throw context.stateFailure(user, "the offline-code challenge", error)
            }
            let counter: UInt32
            switch issue {
            case .issued(let c):
                counter = c
                // The last counter of the epoch: status says so from now on.
                if Int64(c) == OfflineCode.countersPerEpoch { offlineCodesKnown = nil }
            case .usedUp(let e):
                offlineCodesKnown = nil
                context.logger.error(
                    "the offline codes of key epoch \(e) are used up: no challenge is given until they are provisioned again",
                    metadata: ["user": .string(user), "message_id": MessageID.offlineCodeRefused.metadata, "epoch": "\(e)"])
                throw ManagerError.actionFailed(
                    "this machine's offline codes are used up (\(OfflineCode.countersPerEpoch) challenges under its key); no challenge repeats an earlier one, so none is given: an administrator runs lockwipectl offline-code provision --fleet-key-file FILE to move to key epoch \(e + 1)"
                )
            case .tooSoon(let until):
                throw ManagerError.notPermitted(
                    "\(user) asked for \(OfflineChallengeRate.perWindow) challenges within an hour: the next can be asked at \(Timestamp.iso(until)) (in \(max(0, until - now)) s)"
                )
            case .epochChanged:
                offlineCodesKnown = nil
                throw ManagerError.actionFailed("the offline codes were provisioned again while the challenge was asked: ask again")
            }
            challenge.counter = counter
            var meta = context.journalFields(r, action: "offline-code", trigger: Registration.trigger(caller), reason: detailWithout, id: .offlineCodeChallenge)
            meta["request"] = .string(request.description)
            meta["challenge"] = .string(challenge.text)
            meta["counter"] = "\(counter)"
            meta["machine"] = .string(machineHex)
            meta["peer_uid"] = "\(caller.credentials.uid)"
            context.logger.notice("offline-code challenge for \(user): \(request)", metadata: meta)
            return OfflineCodeChallengeReply(user: user, challenge: challenge.text, machine: machineHex, request: request.description)
        }
    }

    // MARK: Enter

    /// The helpdesk's response to `user`'s outstanding challenge: does what it asked, once.
    public func offlineCodeEnter(user: String, code: String, by caller: Caller) async throws -> Outcome {
        let result = try await registration(named: user).withTurn { turn in
            try await turn.registration.offlineCodeEnter(in: turn, code: code, by: caller)
        }
        await reschedule()
        return result
    }

    // MARK: Helpers

}
