import Foundation
import Testing

@testable import LockwipeCheckIn
@testable import LockwipeDaemon

@Suite struct DeviceIDTests {
    /// Expected values from `systemd-id128 machine-id --app-specific=64e38009235247e6b0d20780d26f6821`
    /// on a machine with that machine id (and the same HMAC computed independently).
    @Test(arguments: [
        ("3d1219c7c4c5404aaa1f6d2a48adfda4", "00a6c677e7b941f7815d67575a4d941a"),
        ("00000000000000000000000000000001", "7046626729b6401cb103e4ca642b85c3"),
        ("ffffffffffffffffffffffffffffffff", "82ae7f42b13842489c7f9e558ed370c1"),
    ])
    func derivedLikeSystemd(machineID: String, expected: String) throws {
        let bytes = try #require(DeviceID.parseMachineID(machineID + "\n"))
        let id = DeviceID.appSpecific(machineID: bytes)
        #expect(id == expected)
        #expect(id != machineID)
    }

    @Test(arguments: ["", "3d1219c7", "3d1219c7c4c5404aaa1f6d2a48adfdZZ", "00000000000000000000000000000000", "3d1219c7-c4c5-404a-aa1f-6d2a48adfda4"])
    func notAMachineID(_ text: String) {
        #expect(DeviceID.parseMachineID(text) == nil)
    }
}
