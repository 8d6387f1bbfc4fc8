// outbox: a sealed outbox (docs/outbox.md) read with the organisation's private key,
// here, offline: the key never reaches lockwiped or the machine the outbox came from.

import ArgumentParser
import Crypto
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

struct OutboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "Read a sealed outbox with the organisation's private key (no daemon, no root needed).",
        discussion: """
            Before a lock, wipe or unregister, lockwiped seals what the vault's applications \
            had not yet uploaded ([outbox] in lockwiped.toml) to the organisation's key, in \
            /var/lib/lockwipe/outbox/, and uploads it to the lockwipe policy server. Only the \
            private key opens it. See docs/outbox.md.
            """,
        subcommands: [Show.self, Open.self])

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Say whose a sealed outbox is; with --key-file, list its files too.",
            discussion: "It asks no daemon: the global options are accepted and change nothing.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: ArgumentHelp("The sealed outbox (.lwo).", valueName: "file"), completion: .file())
        var file: String
        @Option(name: .customLong("key-file"), help: ArgumentHelp("The organisation's private key file (lockwipectl recovery-key new).", valueName: "file"), completion: .file())
        var keyFile: String?

        func run() throws {
            let bytes = try readSealedOutbox(file)
            if let keyFile {
                let (header, files) = try openSealedOutbox(bytes, file: file, keyFile: keyFile)
                printHeader(header)
                for f in files { print("\(f.path)\t\(f.contents.count) bytes\tmode \(String(f.mode, radix: 8))\tmodified \(isoTime(f.modified))") }
                print(TextFormat.count(files.count, "file", "files"))
            } else {
                do throws(OutboxSealError) {
                    printHeader(try OutboxOpener.header(bytes))
                } catch {
                    throw CommandFailure(code: ExitStatus.failed, message: "\(file) \(error.description)")
                }
            }
        }
    }

    struct Open: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "open",
            abstract: "Write the files of a sealed outbox into a new directory.",
            discussion: """
                Each file is written under DIR at its path in the vault (/srv/vault/alice/outbox/a.json \
                becomes DIR/srv/vault/alice/outbox/a.json), mode 0600, with its modification time. \
                DIR must not exist. Nothing is written unless the whole outbox opens. It asks no \
                daemon: the global options are accepted and change nothing.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: ArgumentHelp("The sealed outbox (.lwo).", valueName: "file"), completion: .file())
        var file: String
        @Option(name: .customLong("key-file"), help: ArgumentHelp("The organisation's private key file (lockwipectl recovery-key new).", valueName: "file"), completion: .file())
        var keyFile: String
        @Option(name: .customLong("output"), help: ArgumentHelp("The directory to create and write into.", valueName: "dir"), completion: .directory)
        var output: String

        func run() throws {
            let (header, files) = try openSealedOutbox(try readSealedOutbox(file), file: file, keyFile: keyFile)
            guard mkdir(output, 0o700) == 0 else {
                let why = errno == EEXIST ? "it exists already (a new directory is made for each outbox)" : String(cString: strerror(errno))
                throw CommandFailure(code: ExitStatus.failed, message: "cannot create \(output): \(why)")
            }
            let root = open(output, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard root >= 0 else { throw CommandFailure(code: ExitStatus.failed, message: "cannot open \(output): \(String(cString: strerror(errno)))") }
            defer { close(root) }
            // The directory opened is the one just made: ours and empty (2 links), not one
            // put in its place meanwhile; everything below is written through this descriptor.
            var st = stat()
            guard fstat(root, &st) == 0, st.st_uid == geteuid(), st.st_nlink == 2, st.st_mode & 0o077 == 0 else {
                throw CommandFailure(code: ExitStatus.failed, message: "\(output) was replaced while it was being made; nothing was written")
            }
            printHeader(header)
            for f in files {
                try write(f, under: root)
                print("\(output)\(f.path.hasPrefix("/") ? "" : "/")\(f.path)\t\(f.contents.count) bytes")
            }
            print("wrote \(TextFormat.count(files.count, "file", "files")) into \(output)")
        }

        /// Writes `f` at its path under `root`, one component at a time, never following a
        /// symlink and never over an existing file.
        private func write(_ f: OutboxFile, under root: Int32) throws {
            let parts = f.path.split(separator: "/").map(String.init)
            guard let name = parts.last, !parts.contains(where: { $0 == "." || $0 == ".." }) else {
                throw CommandFailure(code: ExitStatus.failed, message: "the outbox names a file \(f.path) that cannot be written safely")
            }
            var dir = dup(root)
            defer { close(dir) }
            for component in parts.dropLast() {
                if mkdirat(dir, component, 0o700) != 0, errno != EEXIST { throw failure(f.path) }
                let next = openat(dir, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard next >= 0 else { throw failure(f.path) }
                close(dir)
                dir = next
            }
            let fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw failure(f.path) }
            defer { close(fd) }
            var done = 0
            while done < f.contents.count {
                let n = f.contents.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { throw failure(f.path) }
                done += n
            }
            var times = [timespec(tv_sec: Int(f.modified), tv_nsec: 0), timespec(tv_sec: Int(f.modified), tv_nsec: 0)]
            guard futimens(fd, &times) == 0 else { throw failure(f.path) }
        }

        private func failure(_ path: String) -> CommandFailure {
            CommandFailure(code: ExitStatus.failed, message: "cannot write \(path) under \(output): \(String(cString: strerror(errno)))")
        }
    }
}

private func printHeader(_ h: OutboxHeader) {
    print("outbox of \(h.user) (registration \(h.registration)), sealed \(isoTime(h.sealedAt)) before the \(h.reason), to \(h.recipient)")
}

private func isoTime(_ seconds: Int64) -> String {
    Date(timeIntervalSince1970: TimeInterval(seconds)).formatted(.iso8601)
}

private func readSealedOutbox(_ path: String) throws -> [UInt8] {
    Array(try UserFile.contents(path, what: "sealed outbox", limit: 1 << 31))
}

private func openSealedOutbox(_ bytes: [UInt8], file: String, keyFile: String) throws -> (OutboxHeader, [OutboxFile]) {
    let key = try readRecoveryPrivateKey(keyFile)
    do throws(OutboxSealError) {
        return try OutboxOpener.open(bytes, privateKey: key)
    } catch {
        throw CommandFailure(code: ExitStatus.failed, message: "\(file) does not open: \(error.description)")
    }
}
