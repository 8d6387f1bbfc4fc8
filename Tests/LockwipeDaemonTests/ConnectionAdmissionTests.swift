import Foundation
import Testing

@testable import LockwipeDaemon

@Suite struct ConnectionAdmissionTests {
    @Test func oneUserGetsAQuarterAndCannotLockOutOthersOrRoot() {
        var a = ConnectionAdmission(maxConnections: 64)
        for _ in 0..<16 { #expect(a.admit(uid: 1000) == nil) }
        #expect(a.admit(uid: 1000) == .perUser(16))
        #expect(a.admit(uid: 1001) == nil, "another user was locked out by the first one's connections")
        #expect(a.admit(uid: 0) == nil, "root was locked out")
        a.release(uid: 1000)
        #expect(a.admit(uid: 1000) == nil, "a released slot was not given back")
    }

    @Test func usersTogetherStopAtTheLimitAndRootStillGetsThrough() {
        var a = ConnectionAdmission(maxConnections: 8)  // 2 each
        for uid in UInt32(1000)..<1004 {
            #expect(a.admit(uid: uid) == nil)
            #expect(a.admit(uid: uid) == nil)
        }
        #expect(a.admit(uid: 2000) == .nonRootTotal(8))
        #expect(a.admit(uid: nil) == .nonRootTotal(8), "a peer without credentials is not exempt")
        for _ in 0..<8 { #expect(a.admit(uid: 0) == nil) }
        #expect(a.admit(uid: 0) == .root(8))
        a.release(uid: 1000)
        #expect(a.admit(uid: 2000) == nil)
    }

    @Test func releasingMoreThanWasAdmittedChangesNothing() {
        var a = ConnectionAdmission(maxConnections: 4)
        a.release(uid: 1000)
        #expect(a.nonRoot == 0)
        #expect(a.admit(uid: 1000) == nil)
        #expect(a.admit(uid: 1000) == .perUser(1))
    }

    @Test func refusalsAreLoggedOncePer10SecondsWithTheCountInBetween() {
        var t = RefusalLogThrottle()
        let start = ContinuousClock.now
        #expect(t.shouldLog(now: start) == 0)
        for i in 1...99 { #expect(t.shouldLog(now: start + .milliseconds(i)) == nil) }
        #expect(t.shouldLog(now: start + .seconds(10)) == 99)
        #expect(t.shouldLog(now: start + .seconds(11)) == nil)
    }
}
