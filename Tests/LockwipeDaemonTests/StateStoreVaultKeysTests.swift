import Crypto
import Foundation
import GRDB
import LockwipeBase
import LockwipeCore
import LockwipeProtocol
import LockwipeVaultIO
import Testing

@testable import LockwipeDaemon

@Suite struct StateStoreVaultKeysTests {
    func withStore(_ body: (StateStore, String) async throws -> Void) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwvault-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await body(try StateStore(directory: dir), dir)
    }

    func record(_ user: String) -> RegistrationRecord {
        var r = RegistrationRecord(
            user: user, uid: 1001, state: .active, protection: .encrypted, directories: ["/srv/\(user)"],
            lockTrigger: nil, blocked: false, clock: .started(at: ClockReading(wall: 100, boot: 5, bootID: "x")), lastWipe: nil)
        r.id = id(user)
        return r
    }

    /// The id `record(user)` has (stable, so the store's operations can name it).
    func id(_ user: String) -> RegistrationID { RegistrationID(String(repeating: "0", count: 32 - user.utf8.count) + user) }

    func ev(_ user: String, _ kind: String) -> StoredEvent { StoredEvent(time: 100, user: user, kind: EventKind(rawValue: kind)!, trigger: .admin, detail: "") }

    static let cheap = WrappedKey.ScryptParameters(logN: 10, r: 8, p: 1)

    func stored(_ key: [UInt8], passcode: String) throws -> StoredVaultKey {
        StoredVaultKey(
            identifier: Fscrypt.KeyIdentifier(bytes: try VaultKeys.keyIdentifier(key)),
            wrapped: try KeyWrap.wrap(key, passcode: passcode, machineKey: nil, registration: nil, parameters: Self.cheap), passcodeSetAt: 100)
    }

    /// Every file of the database (main, WAL) as raw bytes.
    func raw(_ dir: String) -> Data {
        ["", "-wal"].reduce(into: Data()) { all, suffix in
            all += FileManager.default.contents(atPath: dir + "/" + StateStore.fileName + suffix) ?? Data()
        }
    }

    @Test func theWrappedKeyIsStoredWithTheRegistrationAndOpensWithThePasscode() async throws {
        try await withStore { store, dir in
            let key = (0..<Fscrypt.keySize).map { UInt8($0) }
            let k = try stored(key, passcode: "pass-1234")
            try await store.insert(record("alice"), vaultKey: k, event: ev("alice", "register"))
            let back = try await #require(try StateStore(directory: dir).vaultKey(registration: id("alice")))
            #expect(back.wrapped == k.wrapped && back.identifier == k.identifier && back.passcodeSetAt == 100)
            #expect(try KeyWrap.unwrap(back.wrapped, passcode: "pass-1234", machineKey: nil, registration: nil) == key)
            // The raw key is never written, and the sealed box only to its own file,
            // 0600 in a 0700 directory.
            #expect(raw(dir).range(of: Data(key)) == nil)
            #expect(raw(dir).range(of: k.wrapped.sealed) == nil)
            #expect(try store.keyFiles.names() == [back.keyFile!])
            var st = stat()
            #expect(stat(store.keyFiles.path, &st) == 0 && st.st_mode & 0o777 == 0o700)
            #expect(stat(store.keyFiles.path + "/" + back.keyFile!, &st) == 0 && st.st_mode & 0o777 == 0o600)
        }
    }

    @Test func keysOfAnOlderDatabaseMoveToFilesAndLeaveNoCopyInIt() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwvault-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = [UInt8](repeating: 5, count: 64)
        let k = try stored(key, passcode: "legacy-pass")
        let w = k.wrapped
        do {
            // The database lockwiped made before v6-key-files, with the key in a row.
            try StateStore.migrate(path: dir + "/" + StateStore.fileName, keyFiles: KeyFiles(stateDirectory: dir), upTo: "v3-vault")
            let queue = try DatabaseQueue(path: dir + "/" + StateStore.fileName)
            try await queue.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO registrations (user, uid, state, protection, created_at, clock_last_contact, clock_accumulated_boot,
                            clock_boot_id, clock_boot_mark, clock_last_wall, clock_offline_seconds)
                        VALUES ('alice', 1001, 'active', 'encrypted', 100, 100, 0, 'x', 0, 100, 0)
                        """)
                try db.execute(
                    sql: """
                        INSERT INTO vault_keys (user, key_identifier, wrapping, salt, scrypt_log_n, scrypt_r, scrypt_p, sealed, passcode_set_at)
                        VALUES ('alice', ?, 'passcode', ?, ?, ?, ?, ?, 100)
                        """, arguments: [k.identifier.description, w.salt, w.scrypt!.logN, w.scrypt!.r, w.scrypt!.p, w.sealed])
                // Rewritten a few times, as failed unlocks did: page images in the WAL.
                for _ in 0..<3 { try db.execute(sql: "UPDATE vault_keys SET failed_attempts = failed_attempts + 1") }
            }
            try queue.close()
        }
        let store = try StateStore(directory: dir)
        let alice = try #require(try await store.registration("alice")).id
        let back = try await #require(try store.vaultKey(registration: alice))
        #expect(back.wrapped == w && back.failedAttempts == 3)
        #expect(try KeyWrap.unwrap(back.wrapped, passcode: "legacy-pass", machineKey: nil, registration: nil) == key)
        #expect(try store.keyFiles.names() == [back.keyFile!])
        #expect(raw(dir).range(of: w.sealed) == nil)
    }

    @Test func keyFilesNoRowNamesAreDestroyedAtStartUp() async throws {
        try await withStore { store, dir in
            let k = try stored([UInt8](repeating: 1, count: 64), passcode: "p")
            try await store.insert(record("alice"), vaultKey: k, event: ev("alice", "register"))
            let kept = try await #require(try store.vaultKey(registration: id("alice"))?.keyFile)
            // What a crash between writing a new key file and committing it leaves.
            let orphan = try store.keyFiles.write(try KeyWrap.wrap([UInt8](repeating: 2, count: 64), passcode: "q", machineKey: nil, registration: nil, parameters: Self.cheap))
            await #expect(try store.destroyOrphanKeyFiles() == [orphan])
            #expect(try store.keyFiles.names() == [kept])
            await #expect(try store.vaultKey(registration: id("alice"))?.wrapped == k.wrapped)
        }
    }

    @Test func failedUnlocksAreCountedDurablyAndResetByARightPasscode() async throws {
        try await withStore { store, dir in
            try await store.insert(record("alice"), vaultKey: try stored([UInt8](repeating: 7, count: 64), passcode: "p"), event: ev("alice", "register"))
            await #expect(try store.recordFailedUnlock(TurnHeld(testing: id("alice")), at: 150, event: ev("alice", "unlock-failed")) == 1)
            await #expect(try store.recordFailedUnlock(TurnHeld(testing: id("alice")), at: 150, event: nil) == 2)
            await #expect(try StateStore(directory: dir).vaultKey(registration: id("alice"))?.failedAttempts == 2)
            try await store.resetFailedUnlocks(TurnHeld(testing: id("alice")))
            await #expect(try store.vaultKey(registration: id("alice"))?.failedAttempts == 0)
            await #expect(try store.events(user: "alice", limit: 10).map(\.kind.rawValue) == ["register", "unlock-failed"])
        }
    }

    @Test func rewrappingLeavesNoCopyOfTheOldWrappedKeyInTheDatabaseOrItsLog() async throws {
        try await withStore { store, dir in
            let key = [UInt8](repeating: 9, count: 64)
            let old = try stored(key, passcode: "old-passcode")
            try await store.insert(record("alice"), vaultKey: old, event: ev("alice", "register"))
            _ = try await store.recordFailedUnlock(TurnHeld(testing: id("alice")), at: 150, event: nil)
            let oldFile = try await #require(try store.vaultKey(registration: id("alice"))?.keyFile)
            let new = try KeyWrap.wrap(key, passcode: "new-passcode", machineKey: nil, registration: nil, parameters: Self.cheap)
            await #expect(try store.rewrapVaultKey(TurnHeld(testing: id("alice")), new, passcodeSetAt: 200, event: ev("alice", "passcode-changed")) == nil)
            let back = try await #require(try store.vaultKey(registration: id("alice")))
            #expect(back.wrapped == new && back.passcodeSetAt == 200 && back.failedAttempts == 0)
            #expect(back.keyFile != oldFile)
            #expect(try store.keyFiles.names() == [back.keyFile!])
            #expect(raw(dir).range(of: old.wrapped.sealed) == nil)
        }
    }

    @Test func destroyingTheKeyLeavesNoCopyAndIsRecordedOnce() async throws {
        try await withStore { store, dir in
            let k = try stored([UInt8](repeating: 3, count: 64), passcode: "p")
            try await store.insert(record("alice"), vaultKey: k, event: ev("alice", "register"))
            try await store.commitWipeIntent(TurnHeld(testing: id("alice")), reason: "test", trigger: .admin, event: ev("alice", "wipe-started"))
            await #expect(try store.destroyVaultKey(TurnHeld(testing: id("alice")), at: 300, secondsSinceRequest: 0.25, event: ev("alice", "key-destroyed")))
            await #expect(try store.vaultKey(registration: id("alice")) == nil)
            #expect(try store.keyFiles.names().isEmpty)
            #expect(raw(dir).range(of: k.wrapped.sealed) == nil)
            let wal = FileManager.default.contents(atPath: dir + "/" + StateStore.fileName + "-wal") ?? Data()
            #expect(wal.isEmpty)
            // A resumed wipe finds it gone and keeps the first moment.
            await #expect(try !store.destroyVaultKey(TurnHeld(testing: id("alice")), at: 400, secondsSinceRequest: 9, event: ev("alice", "key-destroyed")))
            await #expect(try store.keyDestroyed(registration: id("alice"))?.at == 300)
            await #expect(try store.keyDestroyed(registration: id("alice"))?.seconds == 0.25)
            await #expect(try store.events(user: "alice", limit: 10).filter { $0.kind == .keyDestroyed }.count == 1)
        }
    }

    @Test func theMachineKeyIsCreatedOncePrivateAndReadBackAndAnUnusableOneIsNeverReplaced() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwmk-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let plain = CredentialSealer(setting: .none)
        let first = try await VaultKeys(stateDirectory: dir, sealer: plain).machineKey()
        let second = try await VaultKeys(stateDirectory: dir, sealer: plain).machineKey()
        #expect(first == second)
        var st = stat()
        #expect(stat(dir + "/" + MachineKey.fileName, &st) == 0 && st.st_mode & 0o777 == 0o600 && st.st_size == 32)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [MachineKey.fileName])
        // A key file others could read is refused, and fails closed: no new key is made over it.
        chmod(dir + "/" + MachineKey.fileName, 0o644)
        let third = VaultKeys(stateDirectory: dir, sealer: plain)
        await #expect(throws: KeyUnavailable.self) { try await third.machineKey() }
        #expect(await third.machineKeyState().problem?.contains("mode 0600") == true)
        #expect(stat(dir + "/" + MachineKey.fileName, &st) == 0 && st.st_size == 32)
    }
}
