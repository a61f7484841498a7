// The stdio endpoint's short-read rule, per kind of stdin (StdinSource.waitsAfter): after
// a read shorter than asked, a pipe, a socket and a terminal hold nothing more (wait for
// poll), a regular file is read again at once (its end follows; nothing would wake it).
// The client and --broadcast disagreed before for a socket (the broadcast read it again).
import Glibc
import XCTest
import WebSocketEngine
import WebSocketTransport
@testable import WSPipeBridge

final class StdinReadRuleTests: XCTestCase {
    private var opened: [Int32] = []

    override func tearDown() {
        for fd in opened { close(fd) }
        opened = []
    }

    private func keep(_ fds: Int32...) { opened += fds }

    /// The rule for a descriptor: its kind, and whether a short and a full read wait.
    private func rule(_ fd: Int32) -> (kind: StreamKind, short: Bool, full: Bool) {
        let source = StdinSource(fd: fd)
        return (source.kind, source.waitsAfter(reading: 10, of: 65536), source.waitsAfter(reading: 65536, of: 65536))
    }

    func testAShortReadOfAPipeWaitsAndAFullOneReadsAgain() {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        keep(fds[0], fds[1])
        let (kind, short, full) = rule(fds[0])
        XCTAssertEqual(kind, .pipe)
        XCTAssertTrue(short, "a short read emptied the pipe")
        XCTAssertFalse(full, "a full read may have left more: RWF_NOWAIT reads again without blocking")
    }

    func testAShortReadOfASocketWaitsAndAFullOneReadsAgain() {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        keep(fds[0], fds[1])
        let (kind, short, full) = rule(fds[0])
        XCTAssertEqual(kind, .socket)
        XCTAssertTrue(short, "recv took everything queued: another read would meet EAGAIN")
        XCTAssertFalse(full)
        // What the rule rests on: a read asking for more than is queued gets all of it.
        let written = Array(repeating: UInt8(ascii: "x"), count: 3000)
        XCTAssertEqual(written.withUnsafeBytes { write(fds[1], $0.baseAddress, 1000) }, 1000)
        XCTAssertEqual(written.withUnsafeBytes { write(fds[1], $0.baseAddress! + 1000, 2000) }, 2000)
        var buffer = [UInt8](repeating: 0, count: 65536)
        guard case .data(let n) = buffer.withUnsafeMutableBytes({ StdinSource(fd: fds[0]).read(into: $0.baseAddress!, count: $0.count) }) else {
            return XCTFail("no data")
        }
        XCTAssertEqual(n, 3000, "both writes in one read")
        guard case .wouldBlock = buffer.withUnsafeMutableBytes({ StdinSource(fd: fds[0]).read(into: $0.baseAddress!, count: $0.count) }) else {
            return XCTFail("the short read had emptied it")
        }
    }

    func testAShortReadOfARegularFileReadsAgainForItsEnd() throws {
        let path = NSTemporaryDirectory() + "stdin-rule-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("abc".utf8)))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        keep(fd)
        let (kind, short, full) = rule(fd)
        XCTAssertEqual(kind, .regular)
        XCTAssertFalse(short, "epoll cannot watch a file: waiting would never end")
        XCTAssertFalse(full)
    }

    func testATerminalAndDevNullAlwaysWaitForPoll() {
        // A pseudo-terminal (its master side: the same character-device kind as its slave).
        let terminal = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        XCTAssertGreaterThanOrEqual(terminal, 0)
        keep(terminal)
        let null = open("/dev/null", O_RDONLY)
        keep(null)
        for fd in [terminal, null] {
            let (kind, short, full) = rule(fd)
            XCTAssertEqual(kind, .device)
            XCTAssertTrue(short, "a plain read of a terminal blocks when it holds nothing")
            XCTAssertTrue(full)
        }
    }
}

/// The reader on a real loop: a regular file is read to its end in one turn (treated as
/// emptied by its short read, it would take a second turn, via the always-ready watch).
final class StdinReaderTests: XCTestCase {
    private final class Owner: StdinReaderOwner {
        var reads: [String] = []
        var stopsAt: Int
        let loop: EventLoop
        init(loop: EventLoop, stopsAt: Int) {
            self.loop = loop
            self.stopsAt = stopsAt
        }
        var wantsStdin: Bool { true }
        func stdinRead(_ read: StdinRead) -> Bool {
            switch read {
            case .data(let chunk): reads.append("data \(chunk.count)")
            case .end: reads.append("end")
            case .failed(let why): reads.append("failed \(why)")
            }
            if reads.count == stopsAt { loop.stop() }
            return true
        }
        func stdinTurnEnded() { reads.append("turn") }
    }

    /// Runs the loop until the owner has seen `reads` reads, at most 5 s.
    private func run(fd: Int32, readSize: Int, reads: Int) throws -> (StdinReader, Owner) {
        let loop = try EventLoop()
        let owner = Owner(loop: loop, stopsAt: reads)
        let reader = StdinReader(loop: loop, readSize: readSize, source: StdinSource(fd: fd))
        reader.owner = owner
        let bound = loop.timer { loop.stop() }
        loop.arm(bound, at: Instant.now().adding(seconds: 5))
        reader.refresh()
        loop.run()
        return (reader, owner)
    }

    func testARegularFileIsReadToItsEndInOneTurn() throws {
        let path = NSTemporaryDirectory() + "stdin-reader-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x61, count: 100)))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let (reader, owner) = try run(fd: fd, readSize: 64, reads: 3)
        XCTAssertEqual(owner.reads, ["data 64", "data 36", "end", "turn"], "a file's short read is followed at once by its end")
        XCTAssertFalse(reader.open)
    }
}
