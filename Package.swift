// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "lockwipe",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "lockwiped", targets: ["lockwiped"]),
        .executable(name: "lockwipectl", targets: ["lockwipectl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
    ],
    targets: [
        // libsystemd (sd_notify, sd_journal_sendv, sd_listen_fds, sd-login) and SO_PEERCRED.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // OpenSSL's libcrypto: the overwrite's AES-CTR keystream, generated straight into
        // the writers' aligned buffers (swift-crypto returns a new Data for every call).
        .systemLibrary(
            name: "CLibcrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // Filesystem calls Swift cannot make directly (statx mount ids, inode-flag ioctls, syncfs).
        .systemLibrary(name: "CLockwipeFS"),
        // The pure policy core: no I/O, no clock reads, no globals. swift-crypto's Crypto for
        // the offline codes' HKDF and HMAC (pure computation).
        .target(name: "LockwipeCore", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        // systemd integration: journal log handler, sd_notify, socket activation, peer credentials.
        .target(
            name: "LockwipeSystemd",
            dependencies: ["CSystemd", .product(name: "Logging", package: "swift-log")]
        ),
        // What the daemon's rooms share below the domain: the blocking pool, errors put into
        // words, FileSystemError, /proc reads. Knows nothing of lockwipe's domain.
        .target(
            name: "LockwipeBase",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Vault I/O below the domain: reaching a vault safely (VaultPath), taking back mounts
        // over it, the permission and fscrypt locks, key wrapping, the machine key, fscrypt's
        // ioctls and the vault calls with their deadline. Knows neither the Manager nor the store.
        .target(
            name: "LockwipeVaultIO",
            dependencies: [
                "LockwipeBase", "LockwipeCore", "CLockwipeFS",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // Ending a user's processes (ProcessTerminator), for the lock and for whatever else
        // must cut her off: /proc read with readdir, signals by pidfd and as her, her FUSE
        // connections aborted (VaultIO's). Knows neither the Manager nor the store.
        .target(name: "LockwipeProcesses", dependencies: ["LockwipeBase", "LockwipeCore", "LockwipeVaultIO", "CLockwipeFS"]),
        // The Prometheus metrics file: who may read it (MetricsFileOptions), the atomic write
        // (MetricsTextfile), and the publisher that coalesces changes into writes. Knows
        // neither the Manager, the store nor the configuration: it is given a reading.
        .target(
            name: "LockwipeMetrics",
            dependencies: ["LockwipeBase", "LockwipeCore", "CLockwipeFS", .product(name: "Logging", package: "swift-log")]
        ),
        // The policy-server client: the check-in requests over HTTPS (either wire protocol),
        // OAuth access tokens, the SAP device id. Knows neither the Manager nor the store:
        // it is given the refresh-token storage as closures.
        .target(
            name: "LockwipeCheckIn",
            dependencies: [
                "LockwipeBase", "LockwipeCore", "LockwipeProtocol",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The varlink wire protocol shared by daemon and CLI.
        .target(name: "LockwipeProtocol", dependencies: ["LockwipeCore"]),
        // The wipe engine: the erase (SecureEraser, WipeRun) on its thread and writer threads,
        // progress, the survey and media probe, the certificate's verification walk, the
        // wipes running now (WipeCoordinator). Knows neither the Manager nor the store; its
        // progress is reported in the wire's WipeProgressInfo.
        .target(
            name: "LockwipeWipe",
            dependencies: [
                "LockwipeBase", "LockwipeVaultIO", "LockwipeCore", "LockwipeProtocol", "CLockwipeFS", "CLibcrypto",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The daemon engine: configuration, state, lock, wipe, hooks, control socket, systemd.
        .target(
            name: "LockwipeDaemon",
            dependencies: [
                "LockwipeBase", "LockwipeVaultIO", "LockwipeProcesses", "LockwipeWipe", "LockwipeMetrics", "LockwipeCheckIn", "LockwipeCore", "LockwipeProtocol",
                "LockwipeSystemd", "CSystemd", "CLockwipeFS", "CLibcrypto",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // lockwipectl: the command line and its varlink client.
        .target(
            name: "LockwipeCTL",
            dependencies: [
                "LockwipeCore", "LockwipeProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // lockwiped: its command line (ArgumentParser) over the daemon engine.
        .executableTarget(
            name: "lockwiped",
            dependencies: [
                "LockwipeCore", "LockwipeDaemon", "LockwipeProtocol", "LockwipeSystemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(name: "lockwipectl", dependencies: ["LockwipeCTL"]),
        // The control socket's message parser under libFuzzer (scripts/fuzz); a normal
        // build replays inputs instead.
        .executableTarget(name: "lockwipe-fuzz-varlink", dependencies: ["LockwipeProtocol"], path: "Fuzz/VarlinkParser"),
        // What the unit tests share: fakes (clock, server, logind, timers, accounts), one
        // Manager fixture, the golden documents' field check. Public API only, so it also
        // builds in release.
        .target(
            name: "LockwipeTestSupport",
            dependencies: [
                "LockwipeCore", "LockwipeDaemon", "LockwipeSystemd", "LockwipeVaultIO", "LockwipeWipe", "LockwipeCheckIn",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tests/LockwipeTestSupport"
        ),
        .testTarget(name: "LockwipeCoreTests", dependencies: ["LockwipeCore"]),
        .testTarget(name: "LockwipeProtocolTests", dependencies: ["LockwipeProtocol", "LockwipeTestSupport"]),
        .testTarget(
            name: "LockwipeDaemonTests",
            dependencies: [
                "LockwipeBase", "LockwipeVaultIO", "LockwipeProcesses", "LockwipeWipe", "LockwipeMetrics", "LockwipeCheckIn", "LockwipeDaemon",
                "LockwipeTestSupport",
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "LockwipeSystemdTests", dependencies: ["LockwipeSystemd"]),
    ]
)
