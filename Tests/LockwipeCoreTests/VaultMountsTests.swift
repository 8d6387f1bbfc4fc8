import LockwipeCore
import Testing

@Suite struct VaultMountsTests {
    // What /proc/self/mountinfo says on a machine where alice (1001) mounted a FUSE
    // filesystem on her vault and on a directory inside bob's, root mounted a tmpfs inside
    // carol's, and dave's vault is the root of a filesystem of its own (8:17).
    static let mountinfo = """
        22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
        30 22 8:17 / /srv/vaults/dave rw,relatime shared:9 - ext4 /dev/sdb1 rw
        41 22 0:45 / /srv/vaults/alice rw,nosuid,nodev,relatime shared:20 - fuse.sshfs alice@host: rw,user_id=1001,group_id=1001
        42 22 0:46 / /srv/vaults/bob/in\\040here rw,nosuid,nodev - fuse.passthrough passthrough rw,user_id=1001,group_id=1001,allow_other
        43 22 0:47 / /srv/vaults/carol/scratch rw - tmpfs tmpfs rw,size=4096k
        44 41 0:48 / /srv/vaults/alice/nested rw - fuse fuse rw,user_id=1001,group_id=1001
        45 22 0:49 / /srv/vaults/alicex rw - fuse.x x rw,user_id=1001,group_id=1001
        46 22 0:50 / /srv/vaults/erin rw - fuse.rootfs rootfs rw,user_id=0,group_id=0,allow_other
        47 22 0:51 / /srv/vaults/alice rw - fuse.again again rw,user_id=1001,group_id=1001
        this line is not mountinfo
        """

    @Test func mountinfoIsParsedWithItsEscapes() {
        let mounts = MountTable.parse(Self.mountinfo)
        #expect(mounts.count == 9)
        let bob = mounts.first { $0.id == 42 }
        #expect(bob?.mountPoint == "/srv/vaults/bob/in here")
        #expect(bob?.fsType == "fuse.passthrough")
        #expect(bob?.fuseOwner == 1001)
        #expect(bob?.allowsOthers == true)
        let dave = mounts.first { $0.id == 30 }
        #expect(dave?.device == 8 << 8 | 17)
        #expect(dave?.fuseOwner == nil && dave?.isFUSE == false)
        #expect(mounts.first { $0.id == 46 }?.fuseOwner == 0)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var vault: String
        var device: UInt64?
        /// (mount id, detached?) in the order they are acted on.
        var steps: [(UInt64, Bool)]
        var testDescription: String { vault }
    }

    static let rows: [Row] = [
        // Two user mounts stacked on the vault: the top one (mounted last) first; the one
        // mounted on top of the first is inside it and goes with it.
        Row(vault: "/srv/vaults/alice", device: 8 << 8 | 1, steps: [(47, true), (41, true)]),
        // A trailing slash names the same directory; "alicex" is not inside "alice".
        Row(vault: "/srv/vaults/alice/", device: nil, steps: [(47, true), (41, true)]),
        // A user's FUSE mount inside another's vault (allow_other or not): detached.
        Row(vault: "/srv/vaults/bob", device: 8 << 8 | 1, steps: [(42, true)]),
        // Root's tmpfs inside a vault: left (the wipe does not enter it, and says so).
        Row(vault: "/srv/vaults/carol", device: 8 << 8 | 1, steps: [(43, false)]),
        // A vault that is the root of its own filesystem: left.
        Row(vault: "/srv/vaults/dave", device: 8 << 8 | 17, steps: [(30, false)]),
        // ... unless the device is not the recorded one: still left (only root mounts
        // such things), and the vault's open says it is mounted over.
        Row(vault: "/srv/vaults/dave", device: 8 << 8 | 99, steps: [(30, false)]),
        // Root's own FUSE filesystem (user_id=0): left.
        Row(vault: "/srv/vaults/erin", device: 8 << 8 | 1, steps: [(46, false)]),
        Row(vault: "/srv/vaults/frank", device: 8 << 8 | 1, steps: []),
    ]

    @Test(arguments: rows) func whatIsDetachedBeforeALockOrWipe(_ row: Row) {
        let steps = MountTakeback.plan(mounts: MountTable.parse(Self.mountinfo), vault: row.vault, vaultDevice: row.device)
        let got = steps.map { step -> (UInt64, Bool) in
            if case .detach = step.action { return (step.mount.id, true) }
            return (step.mount.id, false)
        }
        #expect(got.map(\.0) == row.steps.map(\.0))
        #expect(got.map(\.1) == row.steps.map(\.1))
    }

    @Test func aDetachSaysWhoMountedIt() {
        let steps = MountTakeback.plan(mounts: MountTable.parse(Self.mountinfo), vault: "/srv/vaults/bob", vaultDevice: nil)
        guard case .detach(let reason) = steps.first?.action else {
            Issue.record("not detached: \(steps)")
            return
        }
        #expect(reason.contains("uid 1001"))
        #expect(steps.first?.mount.description.contains("mounted by uid 1001") == true)
    }
}
