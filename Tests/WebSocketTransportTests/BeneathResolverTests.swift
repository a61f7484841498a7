// BeneathResolver on a real tree in a temporary directory, with both mechanisms.
import Glibc
import XCTest
import TestSupport
import WebSocketCore
@testable import WebSocketTransport

final class BeneathResolverTests: XCTestCase {
    private var base = ""
    private var root: String { base + "/root" }

    override func setUpWithError() throws {
        var template = Array("/tmp/wspipe-beneath-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp: \(String(cString: strerror(errno)))") }
        base = String(cString: made)
        for directory in ["/root", "/root/sub", "/root/sub/deep", "/root/www", "/outside"] {
            XCTAssertEqual(mkdir(base + directory, 0o755), 0)
        }
        write("/root/count", "#!/bin/sh\necho 1\n", mode: 0o755)
        write("/root/sub/deep/prog", "#!/bin/sh\n", mode: 0o755)
        write("/root/plain.txt", "text", mode: 0o644)
        write("/root/www/index.html", "<p>hi</p>", mode: 0o644)
        write("/outside/secret", "#!/bin/sh\necho secret\n", mode: 0o755)
        XCTAssertEqual(symlink(base + "/outside/secret", root + "/out"), 0)
        XCTAssertEqual(symlink("../outside", root + "/outdir"), 0)
        XCTAssertEqual(symlink("count", root + "/in"), 0)
        XCTAssertEqual(mkfifo(root + "/fifo", 0o644), 0)
    }

    override func tearDown() {
        _ = system("rm -rf '\(base)'")
    }

    private func write(_ path: String, _ text: String, mode: mode_t) {
        let fd = open(base + path, O_WRONLY | O_CREAT | O_TRUNC, mode)
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
        fchmod(fd, mode)
        close(fd)
    }

    private var resolvers: [BeneathResolver] {
        get throws { [try BeneathResolver(directory: root, mechanism: .openat2), try BeneathResolver(directory: root, mechanism: .noFollowWalk)] }
    }

    private func program(_ resolver: BeneathResolver, _ target: String) -> Result<Int, ResolveFailure> {
        do {
            let found = try resolver.program(for: try RequestPath(target: target))
            return .success(found.programSegments)
        } catch let failure as ResolveFailure { return .failure(failure) } catch { XCTFail("\(error)"); return .failure(.notFound) }
    }

    func testTheKernelHasOpenat2AndTheDefaultUsesIt() throws {
        // Linux 5.6 and later; the machines this runs on are newer.
        XCTAssertEqual(try BeneathResolver(directory: root).mechanism, .openat2)
    }

    func testTheProgramIsTheLongestExistingPrefixThatIsAnExecutableFile() throws {
        for resolver in try resolvers {
            XCTAssertEqual(program(resolver, "/count"), .success(1), "\(resolver.mechanism)")
            XCTAssertEqual(program(resolver, "/count/more/path"), .success(1))
            XCTAssertEqual(program(resolver, "/sub/deep/prog/x"), .success(3))
            XCTAssertEqual(program(resolver, "/sub/deep/x"), .failure(.notFound))
            XCTAssertEqual(program(resolver, "/sub/deep"), .failure(.isDirectory))
            XCTAssertEqual(program(resolver, "/"), .failure(.isDirectory))
            XCTAssertEqual(program(resolver, "/plain.txt"), .failure(.notExecutable))
            XCTAssertEqual(program(resolver, "/missing"), .failure(.notFound))
            XCTAssertEqual(program(resolver, "/fifo"), .failure(.notRegular))
        }
    }

    func testSymlinksAreRefusedWhetherTheyPointOutOrIn() throws {
        for resolver in try resolvers {
            XCTAssertEqual(program(resolver, "/out"), .failure(.symlink), "\(resolver.mechanism)")
            XCTAssertEqual(program(resolver, "/outdir/secret"), .failure(.symlink))
            XCTAssertEqual(program(resolver, "/in"), .failure(.symlink))
            XCTAssertThrowsError(try resolver.open(segments: [Array("outdir".utf8), Array("secret".utf8)])) {
                XCTAssertEqual($0 as? ResolveFailure, .symlink)
            }
            XCTAssertThrowsError(try resolver.open(segments: [Array("out".utf8)])) { XCTAssertEqual($0 as? ResolveFailure, .symlink) }
        }
    }

    func testTheProgramsDescriptorIsTheFileThatWasChecked() throws {
        let resolver = try BeneathResolver(directory: root)
        let found = try resolver.program(for: try RequestPath(target: "/sub/deep/prog/x"))
        var info = stat()
        XCTAssertEqual(stat(root + "/sub/deep/prog", &info), 0)
        XCTAssertEqual(found.entry.facts.inode, UInt64(info.st_ino))
        XCTAssertEqual(found.entry.facts.kind, .regular)
    }

    func testOpenGivesARegularFileOrADirectoryWithItsFacts() throws {
        for resolver in try resolvers {
            let file = try resolver.open(segments: [Array("www".utf8), Array("index.html".utf8)])
            XCTAssertEqual(file.facts.kind, .regular)
            XCTAssertEqual(file.facts.size, 9)
            var buffer = [UInt8](repeating: 0, count: 16)
            XCTAssertEqual(read(file.fd, &buffer, 16), 9)
            let directory = try resolver.open(segments: [Array("www".utf8)])
            XCTAssertEqual(directory.facts.kind, .directory)
            let index = try resolver.open(Array("index.html".utf8), in: directory)
            XCTAssertEqual(index.facts.inode, file.facts.inode)
            XCTAssertEqual(try resolver.open(segments: []).facts.kind, .directory)
            XCTAssertThrowsError(try resolver.open(segments: [Array("fifo".utf8)])) { XCTAssertEqual($0 as? ResolveFailure, .notRegular) }
            XCTAssertThrowsError(try resolver.open(segments: [Array("count".utf8), Array("x".utf8)])) {
                XCTAssertEqual($0 as? ResolveFailure, .notFound)
            }
            XCTAssertThrowsError(try resolver.open(Array("..".utf8), in: directory)) { XCTAssertEqual($0 as? ResolveFailure, .notFound) }
            XCTAssertThrowsError(try resolver.open(Array("x".utf8), in: file)) { XCTAssertEqual($0 as? ResolveFailure, .notADirectory) }
        }
    }

    func testTakenDescriptorsStayOpenAndOthersAreClosed() throws {
        let resolver = try BeneathResolver(directory: root)
        var fd: Int32 = -1, taken: Int32 = -1
        do {
            let entry = try resolver.open(segments: [Array("plain.txt".utf8)])
            fd = entry.fd
            let other = try resolver.open(segments: [Array("count".utf8)])
            taken = other.take()
        }
        XCTAssertEqual(fcntl(fd, F_GETFD), -1, "closed with its entry")
        XCTAssertGreaterThanOrEqual(fcntl(taken, F_GETFD), 0)
        XCTAssertNotEqual(fcntl(taken, F_GETFD) & FD_CLOEXEC, 0, "close-on-exec")
        close(taken)
    }
}
