import Foundation
import LockwipeCore
import LockwipeTestSupport
import Testing

@testable import LockwipeDaemon

/// What the store keeps in its JSON columns, as the versions before the wire's explicit
/// snake-case keys wrote it (camelCase keys): it must still decode, and the store must
/// still write exactly this.
@Suite struct StoredJSONTests {
    static let wipe =
        #"{"attributesCleared":1,"bytesOverwritten":4096,"caveats":[{"detail":"btrfs","kind":"copy-on-write","path":"/srv/a"}],"complete":false,"elapsedSeconds":1.5,"entriesRemoved":3,"filesOverwritten":2,"keyDestroyedAt":"2026-01-01T00:00:00Z","keyDestroyedSeconds":0.25,"media":[{"devices":[{"backingFile":"/img","model":"M","name":"loop3","partition":"loop3p1","rotational":false,"serial":"S"}],"filesystem":"ext4","filesystemUuid":"u-u","path":"/srv/a"}],"passes":1,"pattern":"zeros","skipped":[{"path":"/srv/a/x","reason":"busy"}]}"#
    static let certificate =
        #"{"bytesOverwritten":4096,"caveats":[{"detail":"d","kind":"names","path":"\/srv\/a"}],"entriesRemoved":3,"exceptions":[{"path":"\/srv\/a\/x","reason":"busy"}],"filesOverwritten":2,"finished":"2026-01-01T00:00:02Z","host":{"hostname":"h","machineId":"m"},"id":"c1","media":[{"devices":[{"backingFile":"\/img","model":"M","name":"loop3","partition":"loop3p1","rotational":false,"serial":"S"}],"filesystem":"ext4","filesystemUuid":"u-u","path":"\/srv\/a"}],"method":{"cipher":"AES","description":"d","keyBits":512,"note":"n","passes":1,"pattern":"zeros","technique":"t","type":"Purge"},"outbox":{"copies":[{"bytes":1200,"httpStatus":201,"name":"o.lwo","problem":"p","receipt":"rc","sha256":"ab","uploaded":true}],"detail":"d","handling":"uploaded"},"request":{"attempt":1,"lease":{"grantedAt":"2026-01-01T00:00:00Z","inForce":true,"reference":"r","source":"server","until":"2026-01-02T00:00:00Z"},"reason":"r","requestedAt":"2026-01-01T00:00:00Z","requester":{"peerUid":0,"policy":"p","retryLimit":5,"server":"https:\/\/s"},"trigger":"admin"},"result":"incomplete","standard":"NIST","started":"2026-01-01T00:00:01Z","subject":{"atRest":"tpm2","directories":["\/srv\/a"],"protection":"encrypted","uid":1000,"user":"alice"},"tool":{"name":"lockwiped","version":"1.0"},"verification":[{"check":"vault-empty","detail":"d","passed":true}]}"#
    static let requester = #"{"peerUid":0,"policy":"p","retryLimit":5,"server":"https://s"}"#
    static let settings =
        #"{"lockWipe":{"blockDisconnectedPeriod":3,"enabled":true,"wipeDisconnectedPeriod":7},"offlineLeaseUntil":1767225600,"passcode":{"defaultPasswordAllowed":false,"enabled":true,"expirationDays":30,"lockTimeout":300,"minLength":8,"minUniqueChars":3,"requiresDigit":true,"requiresLower":true,"requiresSpecial":false,"requiresUpper":true,"retryLimit":5},"problems":[{"key":"passwordPolicy.minLength","message":"m"}],"registrationLocked":true,"sapLockTimeout":300,"sharedDevice":{"enabled":true,"lockOnLogout":true,"maxUsers":4}}"#

    func roundTrip<T: Codable>(_ golden: String, _ type: T.Type, sortedKeys: Bool = false) throws {
        let value = try StoredJSON.decoder().decode(T.self, from: Data(golden.utf8))
        let data = try StoredJSON.encoder(sortedKeys: sortedKeys).encode(value)
        let want = try JSONDecoder().decode(JSONValue.self, from: Data(golden.utf8))
        #expect(try JSONDecoder().decode(JSONValue.self, from: data) == want, "\(T.self): \(String(decoding: data, as: UTF8.self))")
        if sortedKeys { #expect(String(decoding: data, as: UTF8.self) == golden) }
        let unfilled = unfilledFields(value, "\(T.self)")
        #expect(unfilled.isEmpty, "\(T.self): fields the golden leaves empty: \(unfilled)")
    }

    @Test func storedValuesKeepTheirKeys() throws {
        try roundTrip(Self.wipe, WipeSummary.self)
        try roundTrip(Self.certificate, SanitizationCertificate.self, sortedKeys: true)
        try roundTrip(Self.requester, WipeRequester.self)
        try roundTrip(Self.settings, ServerSettings.self)
    }
}

/// The two spellings of a key convert into each other exactly, for every key the wire has.
@Suite struct StoredKeyConversionTests {
    static let pairs = [
        ("files_overwritten", "filesOverwritten"), ("peer_uid", "peerUid"), ("filesystem_uuid", "filesystemUuid"),
        ("machine_id", "machineId"), ("sap_password_policy_lock_timeout", "sapPasswordPolicyLockTimeout"),
        ("key_bits", "keyBits"), ("x", "x"), ("passes", "passes"),
    ]

    @Test func snakeAndCamelAreInverses() {
        for (snake, camel) in Self.pairs {
            #expect(StoredJSON.camelCase(snake) == camel)
            #expect(StoredJSON.snakeCase(camel) == snake)
        }
    }
}
