import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeTestSupport
import Testing

/// The wire's keys, captured from the encoder that converted camelCase names to snake case:
/// every request and reply, with every optional field filled (so every key appears), must
/// decode from these documents and encode back to the same JSON.
@Suite struct WireGoldenTests {
    static let wipe = #"""
        {"attributes_cleared":1,"bytes_overwritten":4096,"caveats":[{"detail":"btrfs","kind":"copy-on-write","path":"/srv/a"}],
         "complete":false,"elapsed_seconds":1.5,"entries_removed":3,"files_overwritten":2,"key_destroyed_at":"2026-01-01T00:00:00Z",
         "key_destroyed_seconds":0.25,"media":[MEDIA],"passes":1,"pattern":"zeros","skipped":[{"path":"/srv/a/x","reason":"busy"}]}
        """#.replacingOccurrences(of: "MEDIA", with: media)
    static let media = #"""
        {"devices":[{"backing_file":"/img","model":"M","name":"loop3","partition":"loop3p1","rotational":false,"serial":"S"}],
         "filesystem":"ext4","filesystem_uuid":"u-u","path":"/srv/a"}
        """#
    static let certificate = #"""
        {"bytes_overwritten":4096,"caveats":[{"detail":"d","kind":"names","path":"/srv/a"}],"entries_removed":3,
         "exceptions":[{"path":"/srv/a/x","reason":"busy"}],"files_overwritten":2,"finished":"2026-01-01T00:00:02Z",
         "host":{"hostname":"h","machine_id":"m"},"id":"c1","media":[MEDIA],
         "method":{"cipher":"AES","description":"d","key_bits":512,"note":"n","passes":1,"pattern":"zeros","technique":"t","type":"Purge"},
         "outbox":{"copies":[{"bytes":1200,"http_status":201,"name":"o.lwo","problem":"p","receipt":"rc","sha256":"ab","uploaded":true}],"detail":"d","handling":"uploaded"},
         "request":{"attempt":1,"lease":{"granted_at":"2026-01-01T00:00:00Z","in_force":true,"reference":"r","source":"server","until":"2026-01-02T00:00:00Z"},
           "reason":"r","requested_at":"2026-01-01T00:00:00Z","requester":{"peer_uid":0,"policy":"p","retry_limit":5,"server":"https://s"},"trigger":"admin"},
         "result":"incomplete","started":"2026-01-01T00:00:01Z","standard":"NIST","subject":{"at_rest":"tpm2","directories":["/srv/a"],"protection":"encrypted","uid":1000,"user":"alice"},
         "tool":{"name":"lockwiped","version":"1.0"},"verification":[{"check":"vault-empty","detail":"d","passed":true}]}
        """#.replacingOccurrences(of: "MEDIA", with: media)
    static let registration = #"""
        {"at_rest":"host","blocked":true,"outbox":{"directory":"outbox","last_sealed":"t","last_uploaded":"t","pending_bytes":10,"pending_files":1,"pending_oldest":"t","pending_problem":"p","sealed_kept":1,"sealed_kept_bytes":100},"blocked_code":"b","credentials":"token","directories":["/srv/a"],"failed_unlocks":1,"key_wrapping":"machine",
         "last_attempt":"2026-01-01T00:00:00Z","last_contact":"2026-01-01T00:00:00Z","last_error":"e","logout_lock_at":"2026-01-01T02:00:00Z",
         "lease":{"ended_at":"2026-01-02T00:00:00Z","granted_at":"2026-01-01T00:00:00Z","in_force":false,"reference":"r","remaining_seconds":0,"source":"offline-code","until":"2026-01-02T00:00:00Z"},
         "lock_liftable":true,"lock_trigger":"offline","lock_waits_for":"login","next_action":{"action":"wipe","at":"2026-01-03T00:00:00Z"},
         "next_check_in":"2026-01-01T01:00:00Z","offline_seconds":60,"passcode_expires":"2026-02-01T00:00:00Z",
         "passcode_policy":{"default_password_allowed":false,"enabled":true,"expiration_days":30,"lock_timeout":300,"min_length":8,
           "min_unique_chars":3,"requires_digit":true,"requires_lower":true,"requires_special":false,"requires_upper":true,"retry_limit":5},
         "policy":{"offline_days_before_lock":3,"offline_days_before_wipe":7,"source":"server","warn_before_seconds":172800},"policy_source":"server","protection":"encrypted",
         "registration_id":"reg","rejected":{"check":"c","http_status":403,"since":"2026-01-01T00:00:00Z","text":"t"},"retry_limit":5,
         "sap_connection":"conn","sap_connection_problem":"p","sap_password_policy_lock_timeout":300,
         "sap_reset":{"at":"2026-01-01T00:00:00Z","connection":"conn","delete_result":"ok","enrol":"ok"},"server_policy_note":"n",
         "shared_device":{"enabled":true,"lock_on_logout":true,"max_users":4},"state":"wipe-pending","uid":1000,"user":"alice",
         "vault_error":"v","warning":{"action":"wipe","at":"2026-01-03T00:00:00Z","in_seconds":3600},"wipe":WIPE,
         "wipe_progress":{"bytes_overwritten":1,"bytes_per_second":2.5,"bytes_total":10,"elapsed_seconds":1.5,"entries_per_second":3.5,
           "entries_removed":1,"eta_seconds":4.5,"files_overwritten":1,"files_total":2,"phase":"overwrite","skipped":0}}
        """#.replacingOccurrences(of: "WIPE", with: wipe)

    static let replies: [(String, any Codable.Type)] = [
        (
            #"{"machine_key":{"problem":"p","recovery_key":"lwr-0011223344556677","sealing":"tpm2"},"offline_codes":{"machine":"m","provision_epoch":1,"provisioned":true},"policy":{"offline_days_before_lock":3,"offline_days_before_wipe":7,"source":"local","warn_before_seconds":172800},"#
                + #""registrations":[REG],"server":{"configured":true,"insecure_http":true,"url":"https://s"},"starting_up":true,"version":"1.0","warnings":["w"]}"#
                .replacingOccurrences(of: "REG", with: registration), StatusReport.self
        ),
        (#"{"offline_days_before_lock":3,"offline_days_before_wipe":7,"source":"local","warn_before_seconds":172800}"#, PolicyInfo.self),
        (
            #"{"events":[{"certificate":CERT,"detail":"d","kind":"wipe-finished","last_time":"2026-01-01T00:10:00Z","registration_id":"reg","repeats":3,"#
                .replacingOccurrences(of: "CERT", with: certificate)
                + #""requester":{"comm":"lockwipectl","pid":42,"uid":0},"time":"2026-01-01T00:00:00Z","trigger":"admin","uid":1000,"user":"alice"}],"truncated":true}"#,
            HistoryReply.self
        ),
        (#"{"certificate":CERT}"#.replacingOccurrences(of: "CERT", with: certificate), CertificateReply.self),
        (
            #"{"results":[{"action":"wipe","detail":"d","failed":true,"lifted":true,"processes":[{"comm":"bash","pid":7,"uid":1000}],"state":"wiped","undo":"u","undone_by_asker":false,"user":"alice","wipe":WIPE}]}"#
                .replacingOccurrences(of: "WIPE", with: wipe), ActionReply.self
        ),
        (
            #"{"previews":[{"bytes":10,"caveats":[{"detail":"d","kind":"snapshots","path":"/srv/a"}],"directories":1,"files":2,"media":MEDIA,"method":"overwrite","#
                .replacingOccurrences(of: "MEDIA", with: media)
                + #""mount_points":["/srv/a/m"],"other_entries":1,"partial":true,"passes":1,"path":"/srv/a","pattern":"zeros","problem":"p","user":"alice"}]}"#,
            WipePreviewReply.self
        ),
        (#"{"challenge":"c","machine":"m","request":"r","user":"alice"}"#, OfflineCodeChallengeReply.self),
        (#"{"detail":"d","machine":"m"}"#, ProvisionOfflineCodesReply.self),
        (
            #"{"missing":[{"reason":"r","user":"bob"}],"wraps":[{"encapsulated":"ZQ==","recovery_key":"lwr-0011223344556677","registration_id":"reg","sealed":"cw==","user":"alice"}]}"#,
            RecoveryWrapsReply.self
        ),
        (#"{"interfaces":["io.lockwipe.Manager"],"product":"p","url":"https://u","vendor":"v","version":"1.0"}"#, ServiceInfo.self),
        (#"{"description":"interface x"}"#, InterfaceDescriptionReply.self),
    ]

    static let requests: [(String, any Codable.Type)] = [
        (#"{"login_gate":true,"user":"alice"}"#, StatusRequest.self),
        (#"{"user":"alice"}"#, UserFilter.self),
        (#"{"all":true,"preview":true,"user":"alice"}"#, TargetSelection.self),
        (#"{"user":"alice"}"#, UserParameter.self),
        (#"{"new_passcode":"n","passcode":"p","user":"alice"}"#, UnlockRequest.self),
        (#"{"current":"c","new":"n","user":"alice"}"#, PasscodeRequest.self),
        (
            #"{"client_certificate":"c","client_key":"k","directories":["/srv/a"],"outbox":"outbox","passcode":"p","refresh_token":"r","require_encryption":true,"token":"t","user":"alice"}"#,
            RegisterRequest.self
        ),
        (#"{"client_certificate":"c","client_key":"k","refresh_token":"r","token":"t","user":"alice"}"#, CredentialsRequest.self),
        (#"{"id":"c1","user":"alice"}"#, CertificateRequest.self),
        (#"{"limit":5,"since":100,"user":"alice"}"#, HistoryRequest.self),
        (#"{"extend_days":2,"user":"alice"}"#, OfflineCodeChallengeRequest.self),
        (#"{"code":"c","user":"alice"}"#, OfflineCodeEnterRequest.self),
        (#"{"machine":"m","machine_key":"k"}"#, ProvisionOfflineCodesRequest.self),
        (#"{"password":"p","uid":1000}"#, LoginLiftRequest.self),
        (#"{"user":"alice"}"#, RecoveryWrapsRequest.self),
        (#"{"key":"a2V5","new_passcode":"p","registration_id":"reg","user":"alice"}"#, RecoverRequest.self),
        (#"{"interface":"io.lockwipe.Manager"}"#, InterfaceDescriptionRequest.self),
    ]

    /// Decodes `golden` as a request's parameters and as a reply, and encodes the value back
    /// as a reply and as a call: the parameters must be the same JSON as `golden`.
    func roundTrip<T: Codable>(_ golden: String, _ type: T.Type) throws {
        let call = try VarlinkMessage.decodeParameters(T.self, from: Data(#"{"method":"x","parameters":\#(golden)}"#.utf8))
        let reply = try VarlinkMessage.decodeReply(T.self, from: Data(#"{"parameters":\#(golden)}"#.utf8))
        let want = try JSONDecoder().decode(JSONValue.self, from: Data(golden.utf8))
        for data in [try VarlinkMessage.encodeReply(call), try VarlinkMessage.encodeCall(method: "x", parameters: reply)] {
            guard case .object(let envelope) = try JSONDecoder().decode(JSONValue.self, from: data) else {
                Issue.record("\(T.self): not an object")
                return
            }
            #expect(envelope["parameters"] == want, "\(T.self): \(String(decoding: data, as: UTF8.self))")
        }
        let unfilled = unfilledFields(call, "\(T.self)")
        #expect(unfilled.isEmpty, "\(T.self): fields the golden leaves empty: \(unfilled)")
    }

    @Test func everyReplyKeepsItsKeys() throws {
        for (golden, type) in Self.replies { try roundTrip(golden, type) }
    }

    @Test func everyRequestKeepsItsKeys() throws {
        for (golden, type) in Self.requests { try roundTrip(golden, type) }
    }
}
