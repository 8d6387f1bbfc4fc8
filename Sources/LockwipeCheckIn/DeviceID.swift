import Crypto
import Foundation

/// The SAP device id (`X-SMP-DEVICEID`) lockwiped sends when `[server] device_id` is not
/// set: an application-specific id derived from the machine id the way systemd's
/// `sd_id128_get_machine_app_specific()` does (HMAC-SHA256 keyed by the machine id over
/// lockwipe's own application id, the first 16 bytes made a UUID v4). It is stable across
/// restarts and reinstalls of the package, and the machine id itself is never sent: it
/// cannot be recovered from the derived id. `systemd-id128 machine-id --app-specific=`
/// `64e38009235247e6b0d20780d26f6821` prints the same id.
public enum DeviceID {
    /// lockwipe's application id (made once with `systemd-id128 new`; never change it:
    /// every machine's device id would change with it).
    public static let applicationID: [UInt8] = hexBytes("64e38009235247e6b0d20780d26f6821")!

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The app-specific id of `machineID` (16 bytes) for `application` (16 bytes), as 32
    /// lower-case hex digits (systemd's format).
    public static func appSpecific(machineID: [UInt8], application: [UInt8] = applicationID) -> String {
        precondition(machineID.count == 16 && application.count == 16)
        let mac = HMAC<SHA256>.authenticationCode(for: application, using: SymmetricKey(data: machineID))
        var id = Array(mac.prefix(16))
        // UUID v4 (random) version and RFC 4122 variant bits, as systemd's id128_make_v4_uuid.
        id[6] = (id[6] & 0x0F) | 0x40
        id[8] = (id[8] & 0x3F) | 0x80
        return id.map { String(format: "%02x", $0) }.joined()
    }

    /// The machine id in `text` (`/etc/machine-id`: 32 hex digits and a newline), or nil.
    public static func parseMachineID(_ text: String) -> [UInt8]? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.count == 32, let bytes = hexBytes(trimmed), bytes.contains(where: { $0 != 0 }) else { return nil }
        return bytes
    }

    /// The device id derived from the machine id in `file`.
    public static func fromMachineID(file: String) throws -> String {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw Failure(description: "cannot be read") }
        guard let id = parseMachineID(text) else { throw Failure(description: "does not hold a machine id (32 hex digits)") }
        return appSpecific(machineID: id)
    }

    static func hexBytes(_ hex: String) -> [UInt8]? {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: chars.count, by: 2) {
            guard let b = UInt8(String(decoding: chars[i...i + 1], as: UTF8.self), radix: 16) else { return nil }
            out.append(b)
        }
        return out
    }
}
